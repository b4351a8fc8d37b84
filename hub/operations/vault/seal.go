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
// loses nothing. The database holds ciphertext only; the key is shared by
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
type Sealer struct {
	aead cipher.AEAD
	id   [4]byte
}

// NewSealer returns a sealer for key, KeySize random bytes.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("enrolment key is %d bytes, want %d (AES-256)", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("enrolment key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("enrolment key: %w", err)
	}
	s := &Sealer{aead: aead}
	sum := sha256.Sum256(key)
	copy(s.id[:], sum[:4])
	return s, nil
}

// LoadSealer reads the key file at path: the KeySize-byte key in standard
// base64 (RFC 4648 §4), surrounding whitespace ignored, as
// `openssl rand -base64 32` writes it. Errors name the path, never the
// contents.
func LoadSealer(path string) (*Sealer, error) {
	data, err := boundedread.File(path, 4096)
	if err != nil {
		return nil, fmt.Errorf("read enrolment key: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Errorf("enrolment key %s: not base64 (create one with: openssl rand -base64 32 > %s)", path, path)
	}
	s, err := NewSealer(key)
	if err != nil {
		// e.g. openssl rand -hex 32: valid base64 of 48 bytes.
		return nil, fmt.Errorf("%s: %w (create one with: openssl rand -base64 32 > %s)", path, err, path)
	}
	return s, nil
}

// KeyID names the key: 8 hex digits.
func (s *Sealer) KeyID() string { return hex.EncodeToString(s.id[:]) }

// Holder is the holder recorded for an enrolment this sealer sealed:
// SealedHolderPrefix and the key id.
func (s *Sealer) Holder() string { return SealedHolderPrefix + s.KeyID() }

// Seal encrypts info for operation opID. It fails only when the system's
// random source does.
func (s *Sealer) Seal(opID string, info map[string]string) ([]byte, error) {
	plain, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("seal driver_info: %w", err)
	}
	out := make([]byte, 0, 1+len(s.id)+s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	out = append(out, sealVersion)
	out = append(out, s.id[:]...)
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal driver_info: nonce: %w", err)
	}
	out = append(out, nonce...)
	return s.aead.Seal(out, nonce, plain, []byte(opID)), nil
}

// Open decrypts what Seal returned for operation opID. Errors wrap
// ErrOtherKey (the key id differs: the message names both ids) or
// ErrBrokenSeal; neither contains any of the value.
func (s *Sealer) Open(opID string, sealed []byte) (map[string]string, error) {
	head := 1 + len(s.id) + s.aead.NonceSize()
	if len(sealed) < head+s.aead.Overhead() || sealed[0] != sealVersion {
		return nil, ErrBrokenSeal
	}
	if id := sealed[1 : 1+len(s.id)]; string(id) != string(s.id[:]) {
		return nil, fmt.Errorf("%w: key %s, this replica has key %s", ErrOtherKey, hex.EncodeToString(id), s.KeyID())
	}
	plain, err := s.aead.Open(nil, sealed[1+len(s.id):head], sealed[head:], []byte(opID))
	if err != nil {
		return nil, ErrBrokenSeal
	}
	var info map[string]string
	if err := json.Unmarshal(plain, &info); err != nil {
		return nil, ErrBrokenSeal
	}
	return info, nil
}
