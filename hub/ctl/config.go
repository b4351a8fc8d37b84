package ctl

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/boundedread"
)

// Environment variables the CLI reads; flags win over them, and they win
// over the selected context.
const (
	// EnvConfig names the config file (default DefaultConfigPath).
	EnvConfig = "IRONLINK_CONFIG"
	// EnvContext selects the context instead of current-context.
	EnvContext = "IRONLINK_CONTEXT"
	// EnvHub overrides the hub address.
	EnvHub = "IRONLINK_HUB_ADDR"
	// EnvCA overrides the CA bundle.
	EnvCA = "IRONLINK_HUB_CA"
	// EnvClientID overrides the client id.
	EnvClientID = "IRONLINK_CLIENT_ID"
	// EnvKey overrides the private key path.
	EnvKey = "IRONLINK_CLIENT_KEY"
	// EnvAudience overrides the hub's audience.
	EnvAudience = "IRONLINK_HUB_AUDIENCE"
)

// DefaultAudience is the JWT audience the hub expects unless configured
// otherwise (the hub's --audience default).
const DefaultAudience = auth.DefaultAudience

// Config is the CLI's config file: named contexts, like a kubeconfig.
//
//	current-context: demo
//	contexts:
//	  - name: demo
//	    hub: localhost:7070
//	    ca: pki/ca.pem            # relative paths are relative to this file
//	    client-id: demo-operator
//	    key: pki/operator.pem
type Config struct {
	// CurrentContext is the context used when none is named.
	CurrentContext string `yaml:"current-context,omitempty"`
	// Contexts, in file order.
	Contexts []Context `yaml:"contexts"`

	// path is where the config was read from (and is saved to).
	path string
}

// Context is one hub and the identity to use there.
type Context struct {
	// Name of the context ([a-zA-Z0-9._-], unique in the file).
	Name string `yaml:"name"`
	// Hub is the hub's gRPC address, host:port.
	Hub string `yaml:"hub"`
	// CA is the PEM bundle that signs the hub's certificate; empty: the
	// system's roots.
	CA string `yaml:"ca,omitempty"`
	// ServerName is the name checked in the hub's certificate; empty: the
	// host of Hub.
	ServerName string `yaml:"server-name,omitempty"`
	// ClientID is the operator's client id in the hub's roster.
	ClientID string `yaml:"client-id,omitempty"`
	// Key is the operator's private key (PKCS#8 PEM) that signs assertions.
	Key string `yaml:"key,omitempty"`
	// KID is the key's id in the roster; empty: its RFC 7638 thumbprint
	// (what `ironlink-hub keygen` writes).
	KID string `yaml:"kid,omitempty"`
	// Audience is the hub's audience; empty: DefaultAudience.
	Audience string `yaml:"audience,omitempty"`
	// TLSClientCert and TLSClientKey are a client certificate for a hub
	// that wants mutual TLS.
	TLSClientCert string `yaml:"tls-client-cert,omitempty"`
	TLSClientKey  string `yaml:"tls-client-key,omitempty"`
	// Plaintext talks to a hub started with --plaintext (development only).
	Plaintext bool `yaml:"plaintext,omitempty"`
	// NoAuth sends no assertion (a hub started with --no-auth).
	NoAuth bool `yaml:"no-auth,omitempty"`
}

// DefaultConfigPath is $IRONLINK_CONFIG, else ironlink/config.yaml under
// the user's config directory ($XDG_CONFIG_HOME or ~/.config on Linux).
func DefaultConfigPath(getenv func(string) string) (string, error) {
	if p := getenv(EnvConfig); p != "" {
		return p, nil
	}
	if x := getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "ironlink", "config.yaml"), nil
	}
	home := getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("no config file: set %s (%w)", EnvConfig, err)
		}
	}
	return filepath.Join(home, ".config", "ironlink", "config.yaml"), nil
}

// LoadConfig reads the config at path. A missing file is an empty config
// (no error), so `config set-context` can create it. Errors: unreadable
// file, malformed YAML, unknown keys (typos), duplicate or empty context
// names.
func LoadConfig(path string) (*Config, error) {
	c := &Config{path: path}
	b, err := boundedread.File(path, boundedread.SmallLimit)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	seen := map[string]bool{}
	for _, x := range c.Contexts {
		if err := validContextName(x.Name); err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
		if seen[x.Name] {
			return nil, fmt.Errorf("config %s: context %q appears twice", path, x.Name)
		}
		seen[x.Name] = true
	}
	return c, nil
}

// Path is the file the config was read from.
func (c *Config) Path() string { return c.path }

// Context returns the context called name.
func (c *Config) Context(name string) (Context, bool) {
	i := slices.IndexFunc(c.Contexts, func(x Context) bool { return x.Name == name })
	if i < 0 {
		return Context{}, false
	}
	return c.Contexts[i], true
}

// SetContext adds x or replaces the context of the same name, keeping the
// file order.
func (c *Config) SetContext(x Context) {
	if i := slices.IndexFunc(c.Contexts, func(y Context) bool { return y.Name == x.Name }); i >= 0 {
		c.Contexts[i] = x
		return
	}
	c.Contexts = append(c.Contexts, x)
}

// DeleteContext removes the context called name; it reports whether there
// was one. Removing the current context clears current-context.
func (c *Config) DeleteContext(name string) bool {
	n := len(c.Contexts)
	c.Contexts = slices.DeleteFunc(c.Contexts, func(x Context) bool { return x.Name == name })
	if c.CurrentContext == name {
		c.CurrentContext = ""
	}
	return len(c.Contexts) != n
}

// Save writes the config back to its path atomically (a temporary file
// renamed over it), creating the directory (0700) and the file (0600).
func (c *Config) Save() error {
	if err := os.MkdirAll(filepath.Dir(c.path), 0o700); err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	b := buf.Bytes()
	tmp, err := os.CreateTemp(filepath.Dir(c.path), ".config-*.yaml")
	if err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("save config: %w", err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("save config: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	if err := os.Rename(tmp.Name(), c.path); err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	return nil
}

// resolvePath makes p (from the config file) absolute relative to the
// file's directory, as kubeconfig does; "" stays "".
func (c *Config) resolvePath(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(c.path), p)
}

func validContextName(n string) error {
	if n == "" {
		return errors.New("a context needs a name")
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("context name %q: use letters, digits, '.', '_' and '-'", n)
		}
	}
	return nil
}
