package fleet

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	gohash "hash"
	"os"
	"strings"
)

// MinKeyLen is the shortest key accepted, in bytes (characters of the key
// file's line): 32 random bytes in base64 are 44.
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

// LoadKeyFile reads a key file: one key per line (leading and trailing
// blanks removed, empty lines and lines starting with # skipped), the
// first signing. The key is the line's bytes, not a decoding of them.
func LoadKeyFile(path string) (*Keyring, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		if len(s) < MinKeyLen {
			return nil, fmt.Errorf("%s:%d: key is %d bytes, want at least %d (e.g. head -c 32 /dev/urandom | base64)", path, line, len(s), MinKeyLen)
		}
		keys = append(keys, []byte(s))
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: no key (one per line, at least %d bytes)", path, MinKeyLen)
	}
	return NewKeyring(keys...)
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
