package fleet

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	gohash "hash"
)

// MinKeyLen is the shortest key accepted, in bytes (the configuration
// reads the key file: config.ReadFleetKeys).
const MinKeyLen = 32

// Keyring holds the fleet keys: the first signs every datagram, each one
// verifies (so a key can be rotated: add the new one second on every
// appliance, then move it first, then drop the old one). A Keyring's
// methods are for one goroutine: each user (sender, receiver) takes its
// own Clone.
type Keyring struct {
	keys [][]byte
	macs []gohash.Hash
	sum  [sha256.Size]byte
}

// NewKeyring returns a keyring over keys (at least one, each at least
// MinKeyLen bytes).
func NewKeyring(keys ...[]byte) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("no key")
	}
	k := &Keyring{}
	for i, key := range keys {
		if len(key) < MinKeyLen {
			return nil, fmt.Errorf("key %d is %d bytes, want at least %d", i+1, len(key), MinKeyLen)
		}
		k.keys = append(k.keys, bytes.Clone(key))
		k.macs = append(k.macs, hmac.New(sha256.New, key))
	}
	return k, nil
}

// Clone returns a keyring with the same keys, for another goroutine.
func (k *Keyring) Clone() *Keyring {
	c, _ := NewKeyring(k.keys...)
	return c
}

// tag computes the tag of msg under key i into the keyring's buffer.
func (k *Keyring) tag(i int, msg []byte) []byte {
	m := k.macs[i]
	m.Reset()
	m.Write(msg)
	return m.Sum(k.sum[:0])[:tagLen]
}

// seal appends the tag of msg (header and body) under the signing key.
func (k *Keyring) seal(msg []byte) []byte { return append(msg, k.tag(0, msg)...) }

// verify reports whether d's last tagLen bytes are the tag of the rest
// under one of the keys.
func (k *Keyring) verify(d []byte) bool {
	if len(d) < tagLen {
		return false
	}
	msg, tag := d[:len(d)-tagLen], d[len(d)-tagLen:]
	for i := range k.macs {
		if hmac.Equal(k.tag(i, msg), tag) {
			return true
		}
	}
	return false
}
