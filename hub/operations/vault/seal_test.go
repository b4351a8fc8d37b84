package vault

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpensOnlyForItsOperationAndKey(t *testing.T) {
	key := newKey(t)
	a, err := NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	info := map[string]string{"ipmi_address": "10.1.0.9", "ipmi_password": "hunter2"}
	sealed, err := a.Seal("op-1", info)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("hunter2")) || bytes.Contains(sealed, []byte("ipmi_password")) {
		t.Fatal("the sealed value holds the credentials in clear")
	}
	// Another replica with the same key opens it.
	b, _ := NewSealer(key)
	got, err := b.Open("op-1", sealed)
	if err != nil || got["ipmi_password"] != "hunter2" || got["ipmi_address"] != "10.1.0.9" || len(got) != 2 {
		t.Fatalf("Open = %v, %v", got, err)
	}
	if again, _ := a.Seal("op-1", info); bytes.Equal(again, sealed) {
		t.Fatal("two seals of the same value are equal: the nonce is not fresh")
	}

	if _, err := b.Open("op-2", sealed); !errors.Is(err, ErrBrokenSeal) {
		t.Fatalf("copied onto another operation: %v, want ErrBrokenSeal", err)
	}
	other, _ := NewSealer(newKey(t))
	if _, err := other.Open("op-1", sealed); !errors.Is(err, ErrOtherKey) || !strings.Contains(err.Error(), a.KeyID()) || !strings.Contains(err.Error(), other.KeyID()) {
		t.Fatalf("another key: %v, want ErrOtherKey naming both key ids", err)
	}
	for name, v := range map[string][]byte{
		"empty":       nil,
		"truncated":   sealed[:20],
		"bit flipped": append(append([]byte{}, sealed[:len(sealed)-1]...), sealed[len(sealed)-1]^1),
		"version 2":   append([]byte{2}, sealed[1:]...),
	} {
		if _, err := b.Open("op-1", v); !errors.Is(err, ErrBrokenSeal) {
			t.Errorf("%s: %v, want ErrBrokenSeal", name, err)
		}
	}
	if a.Holder() != SealedHolderPrefix+a.KeyID() || len(a.KeyID()) != 8 {
		t.Fatalf("holder %q key id %q", a.Holder(), a.KeyID())
	}
}

func TestLoadSealer(t *testing.T) {
	dir := t.TempDir()
	key := newKey(t)
	good := filepath.Join(dir, "key")
	if err := os.WriteFile(good, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := LoadSealer(good)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := NewSealer(key)
	if s.KeyID() != ref.KeyID() {
		t.Fatalf("loaded key id %s, want %s", s.KeyID(), ref.KeyID())
	}
	short := filepath.Join(dir, "short")
	_ = os.WriteFile(short, []byte(base64.StdEncoding.EncodeToString(key[:16])), 0o600)
	raw := filepath.Join(dir, "raw")
	_ = os.WriteFile(raw, []byte("not-base64-secret-value!"), 0o600)
	// The key as hex (openssl rand -hex 32) is valid base64, of 48 bytes.
	hexKey := filepath.Join(dir, "hex")
	_ = os.WriteFile(hexKey, []byte(hex.EncodeToString(key)+"\n"), 0o600)
	for path, want := range map[string]string{
		short:                         "16 bytes, want 32",
		hexKey:                        "48 bytes, want 32 (AES-256) (create one with: openssl rand -base64 32 > " + hexKey + ")",
		raw:                           "openssl rand -base64 32",
		filepath.Join(dir, "missing"): "no such file",
	} {
		_, err := LoadSealer(path)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
			t.Errorf("LoadSealer(%s) = %v, want an error naming the file and %q", path, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "secret-value") {
			t.Errorf("the error shows the file's contents: %v", err)
		}
	}
}

// TestKeyRotation: a key file with the new key first and the old one after
// it seals with the new key and opens what either sealed, so enrolments in
// flight during a rotation are delivered; the same key twice or a file
// without a key is refused.
func TestKeyRotation(t *testing.T) {
	dir := t.TempDir()
	oldKey, newKey := newKey(t), newKey(t)
	old, _ := NewSealer(oldKey)
	sealedOld, err := old.Seal("op-1", map[string]string{"ipmi_password": "before"})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "keys")
	file := "# new key, sealing\n" + base64.StdEncoding.EncodeToString(newKey) + "\n\n# old key, opening only\n" + base64.StdEncoding.EncodeToString(oldKey) + "\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	both, err := LoadSealer(path)
	if err != nil {
		t.Fatal(err)
	}
	fresh, _ := NewSealer(newKey)
	if both.KeyID() != fresh.KeyID() || len(both.KeyIDs()) != 2 || both.KeyIDs()[1] != old.KeyID() {
		t.Fatalf("key ids %v, want the new key %s first, then %s", both.KeyIDs(), fresh.KeyID(), old.KeyID())
	}
	if got, err := both.Open("op-1", sealedOld); err != nil || got["ipmi_password"] != "before" {
		t.Fatalf("a value sealed with the old key: %v %v", got, err)
	}
	sealedNew, _ := both.Seal("op-2", map[string]string{"ipmi_password": "after"})
	if got, err := fresh.Open("op-2", sealedNew); err != nil || got["ipmi_password"] != "after" {
		t.Fatalf("sealed with the first key: %v %v", got, err)
	}
	if _, err := old.Open("op-2", sealedNew); !errors.Is(err, ErrOtherKey) {
		t.Fatalf("the old key alone opens a value of the new one: %v", err)
	}

	dup := filepath.Join(dir, "dup")
	_ = os.WriteFile(dup, []byte(base64.StdEncoding.EncodeToString(oldKey)+"\n"+base64.StdEncoding.EncodeToString(oldKey)+"\n"), 0o600)
	if _, err := LoadSealer(dup); err == nil || !strings.Contains(err.Error(), "keys 1 and 2 are the same key") {
		t.Fatalf("the same key twice: %v", err)
	}
	empty := filepath.Join(dir, "empty")
	_ = os.WriteFile(empty, []byte("# nothing yet\n\n"), 0o600)
	if _, err := LoadSealer(empty); err == nil || !strings.Contains(err.Error(), "no key in the file") {
		t.Fatalf("a file without a key: %v", err)
	}
	bad := filepath.Join(dir, "bad")
	_ = os.WriteFile(bad, []byte(base64.StdEncoding.EncodeToString(newKey)+"\nnot base64!\n"), 0o600)
	if _, err := LoadSealer(bad); err == nil || !strings.Contains(err.Error(), "line 2: not base64") {
		t.Fatalf("a bad second line: %v", err)
	}
}
