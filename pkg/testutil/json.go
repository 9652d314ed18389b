package testutil

import (
	"encoding/json"
	"fmt"
)

// SeekJSONArray reads dec, at the start of a JSON object, up to the first
// element of the object's array named key (skipping the members before
// it), so a test can decode a streamed answer one element at a time.
func SeekJSONArray(dec *json.Decoder, key string) error {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("want an object, got %v, %v", tok, err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return err
		}
		if k == key {
			if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
				return fmt.Errorf("%s: want an array, got %v, %v", key, tok, err)
			}
			return nil
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return fmt.Errorf("no %s", key)
}
