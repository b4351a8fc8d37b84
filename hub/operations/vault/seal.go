package vault

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ironlink/ironlink/internal/boundedread"
)

// KeySize is the size of an enrolment key in bytes (AES-256).
const KeySize = 32

// SealedHolderPrefix starts the holder recorded for an ENROL whose
// driver_info is sealed in PostgreSQL: "sealed:<key id>".
const SealedHolderPrefix = "sealed:"

const sealVersion = 1

// Errors of Open (wrapped).
var (
	// ErrOtherKey: the value was sealed with another key than this
	// sealer's (keys differ between replicas, or the key was rotated
	// before the enrolment was delivered).
	ErrOtherKey = errors.New("sealed with another enrolment key")
	// ErrBrokenSeal: the value is not one Seal produced for this
	// operation (truncated, altered, or copied from another operation).
	ErrBrokenSeal = errors.New("sealed driver_info does not open")
)

// Sealer encrypts the BMC credentials (driver_info) of an ENROL for
// storage in PostgreSQL, so that whichever hub replica holds the site's
// link delivers the enrolment, and a restart or failover before delivery
// loses nothing. The database holds ciphertext only; the keys are shared by
// the replicas (a Kubernetes Secret, a file) and never stored with it.
//
// The scheme is AES-256-GCM (NIST SP 800-38D) with a random 96-bit nonce
// per value and the operation id as additional authenticated data, so a
// sealed value copied onto another operation does not open. A sealed value
// is
//
//	version (1 byte, 1) | key id (4 bytes) | nonce (12 bytes) | ciphertext and tag
//
// over the driver_info map as JSON; the key id is the first 4 bytes of the
// SHA-256 of the key (names the key, reveals nothing of it).
//
// A sealer has one or more keys: the first seals, every one opens what it
// sealed. Rotation is: add the new key second on every replica, then move
// it first, then (once no enrolment sealed with the old one is open) drop
// the old one; no enrolment in flight fails.
type Sealer struct {
	keys []sealKey
}

type sealKey struct {
	aead cipher.AEAD
	id   [4]byte
}

// NewSealer returns a sealer that seals with keys[0] and opens with any of
// keys, each KeySize random bytes. Errors: no key, a key of another size,
// the same key twice.
func NewSealer(keys ...[]byte) (*Sealer, error) {
	if len(keys) == 0 {
		return nil, errors.New("no enrolment key")
	}
	s := &Sealer{}
	for i, key := range keys {
		if len(key) != KeySize {
			return nil, fmt.Errorf("enrolment key %d is %d bytes, want %d (AES-256)", i+1, len(key), KeySize)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("enrolment key %d: %w", i+1, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("enrolment key %d: %w", i+1, err)
		}
		k := sealKey{aead: aead}
		sum := sha256.Sum256(key)
		copy(k.id[:], sum[:4])
		for j, o := range s.keys {
			if o.id == k.id {
				return nil, fmt.Errorf("enrolment keys %d and %d are the same key", j+1, i+1)
			}
		}
		s.keys = append(s.keys, k)
	}
	return s, nil
}

// LoadSealer reads the key file at path: one or more KeySize-byte keys in
// standard base64 (RFC 4648 §4), one per line, as `openssl rand -base64 32`
// writes one; blank lines and lines starting with # are ignored. The first
// key seals, all open (see Sealer for rotation). Errors name the path and
// the line, never the contents.
func LoadSealer(path string) (*Sealer, error) {
	data, err := boundedread.File(path, 64<<10)
	if err != nil {
		return nil, fmt.Errorf("read enrolment key: %w", err)
	}
	hint := fmt.Sprintf("create one with: openssl rand -base64 32 > %s", path)
	var keys [][]byte
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("enrolment key %s line %d: not base64 (%s)", path, n+1, hint)
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("enrolment key %s: no key in the file (%s)", path, hint)
	}
	s, err := NewSealer(keys...)
	if err != nil {
		// e.g. openssl rand -hex 32: valid base64 of 48 bytes.
		return nil, fmt.Errorf("%s: %w (%s)", path, err, hint)
	}
	return s, nil
}

// KeyID names the key that seals: 8 hex digits.
func (s *Sealer) KeyID() string { return hex.EncodeToString(s.keys[0].id[:]) }

// KeyIDs names every key, the sealing one first.
func (s *Sealer) KeyIDs() []string {
	ids := make([]string, len(s.keys))
	for i, k := range s.keys {
		ids[i] = hex.EncodeToString(k.id[:])
	}
	return ids
}

// Holder is the holder recorded for an enrolment this sealer sealed:
// SealedHolderPrefix and the sealing key's id.
func (s *Sealer) Holder() string { return SealedHolderPrefix + s.KeyID() }

// Seal encrypts info for operation opID with the first key. It fails only
// when the system's random source does.
func (s *Sealer) Seal(opID string, info map[string]string) ([]byte, error) {
	k := s.keys[0]
	plain, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("seal driver_info: %w", err)
	}
	out := make([]byte, 0, 1+len(k.id)+k.aead.NonceSize()+len(plain)+k.aead.Overhead())
	out = append(out, sealVersion)
	out = append(out, k.id[:]...)
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal driver_info: nonce: %w", err)
	}
	out = append(out, nonce...)
	return k.aead.Seal(out, nonce, plain, []byte(opID)), nil
}

// Open decrypts what Seal returned for operation opID, with whichever of
// the sealer's keys sealed it. Errors wrap ErrOtherKey (none of the keys:
// the message names the value's key id and this sealer's) or
// ErrBrokenSeal; neither contains any of the value.
func (s *Sealer) Open(opID string, sealed []byte) (map[string]string, error) {
	const idLen = 4
	if len(sealed) < 1+idLen || sealed[0] != sealVersion {
		return nil, ErrBrokenSeal
	}
	var k *sealKey
	for i := range s.keys {
		if string(s.keys[i].id[:]) == string(sealed[1:1+idLen]) {
			k = &s.keys[i]
		}
	}
	if k == nil {
		return nil, fmt.Errorf("%w: key %s, this replica has key %s", ErrOtherKey, hex.EncodeToString(sealed[1:1+idLen]), strings.Join(s.KeyIDs(), ", "))
	}
	head := 1 + idLen + k.aead.NonceSize()
	if len(sealed) < head+k.aead.Overhead() {
		return nil, ErrBrokenSeal
	}
	plain, err := k.aead.Open(nil, sealed[1+idLen:head], sealed[head:], []byte(opID))
	if err != nil {
		return nil, ErrBrokenSeal
	}
	var info map[string]string
	if err := json.Unmarshal(plain, &info); err != nil {
		return nil, ErrBrokenSeal
	}
	return info, nil
}
