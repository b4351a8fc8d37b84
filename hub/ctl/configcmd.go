package ctl

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) loadConfig() (*Config, error) {
	path := a.flags.config
	if path == "" {
		var err error
		if path, err = DefaultConfigPath(a.opts.Getenv); err != nil {
			return nil, usageErr(err)
		}
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		return nil, usageErr(err)
	}
	return cfg, nil
}

// changeConfig loads the config file, applies change and saves the file;
// an error from change is returned as is (nothing is saved), and the line
// change returns is printed once the file is saved.
func (a *app) changeConfig(change func(cfg *Config) (done string, err error)) error {
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	done, err := change(cfg)
	if err != nil {
		return err
	}
	if err := cfg.Save(); err != nil {
		return &Error{Code: ExitError, Msg: err.Error()}
	}
	fmt.Fprintln(a.opts.Stdout, done)
	return nil
}

func (a *app) newConfigCommand() *cobra.Command {
	cfgCmd := &cobra.Command{
		Use:   "config",
		Short: "Manage contexts (hub, CA, client id, key) in the config file",
		Long: `The config file (--config, $IRONLINK_CONFIG, else ~/.config/ironlink/config.yaml)
holds named contexts, like a kubeconfig:

  current-context: demo
  contexts:
    - name: demo
      hub: localhost:7070
      ca: pki/ca.pem              # relative paths: relative to the file
      client-id: demo-operator
      key: pki/operator.pem
      # optional: server-name, kid, audience, tls-client-cert,
      # tls-client-key, plaintext, no-auth

A call uses --context, else $IRONLINK_CONTEXT, else current-context; then
$IRONLINK_HUB_ADDR, $IRONLINK_HUB_CA, $IRONLINK_CLIENT_ID, $IRONLINK_CLIENT_KEY
and $IRONLINK_HUB_AUDIENCE override the context, and the flags of the same
names override those.`,
		Example: `  ironlink config set-context prod --hub hub.example:7070 --ca ca.pem --client-id ops-alice --key alice.pem --use
  ironlink config get-contexts
  ironlink config use-context demo
  ironlink --context prod get sites`,
	}
	cfgCmd.AddCommand(a.newGetContexts(), a.newUseContext(), a.newCurrentContext(), a.newSetContext(), a.newDeleteContext())
	return cfgCmd
}

func (a *app) newGetContexts() *cobra.Command {
	return &cobra.Command{
		Use:   "get-contexts",
		Short: "List the contexts; * marks the current one",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			if len(cfg.Contexts) == 0 {
				fmt.Fprintf(a.opts.Stderr, "no contexts in %s: add one with `ironlink config set-context`\n", cfg.Path())
				return nil
			}
			t := newTable(a.opts.Stdout, "", "CURRENT", "NAME", "HUB", "CLIENT-ID", "CA", "KEY")
			for _, x := range cfg.Contexts {
				cur := ""
				if x.Name == cfg.CurrentContext {
					cur = "*"
				}
				t.row(cur, x.Name, x.Hub, x.ClientID, x.CA, x.Key)
			}
			t.flush()
			return nil
		},
	}
}

func (a *app) newUseContext() *cobra.Command {
	return &cobra.Command{
		Use:               "use-context NAME",
		Short:             "Make NAME the current context",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeContexts,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.changeConfig(func(cfg *Config) (string, error) {
				if _, ok := cfg.Context(args[0]); !ok {
					return "", &Error{Code: ExitNotFound, Msg: fmt.Sprintf("no context %q in %s (contexts: %s)", args[0], cfg.Path(), contextNames(cfg))}
				}
				cfg.CurrentContext = args[0]
				return fmt.Sprintf("switched to context %q", args[0]), nil
			})
		},
	}
}

func (a *app) newCurrentContext() *cobra.Command {
	return &cobra.Command{
		Use:   "current-context",
		Short: "Print the current context (exit 3 when none is set)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			if cfg.CurrentContext == "" {
				return &Error{Code: ExitNotFound, Msg: fmt.Sprintf("no current context in %s", cfg.Path())}
			}
			fmt.Fprintln(a.opts.Stdout, cfg.CurrentContext)
			return nil
		},
	}
}

func (a *app) newSetContext() *cobra.Command {
	var x Context
	var use bool
	cmd := &cobra.Command{
		Use:   "set-context NAME [--hub ADDR] [--ca FILE] [--client-id ID] [--key FILE] ...",
		Short: "Create a context, or change the given fields of an existing one",
		Long: `Create the context NAME, or change only the fields given of an existing one
(other contexts are left alone). File paths given here are stored as absolute
paths (relative ones are taken from the current directory); in a config file
written by hand, relative paths are relative to the file's directory.`,
		Example: `  ironlink config set-context prod --hub hub.example:7070 --ca /etc/ironlink/ca.pem \
      --client-id ops-alice --key ~/.config/ironlink/alice.pem --use`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeContexts,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validContextName(args[0]); err != nil {
				return usageErr(err)
			}
			return a.changeConfig(func(cfg *Config) (string, error) {
				return setContext(cfg, cmd.Flags().Changed, args[0], x, use)
			})
		},
	}
	// These shadow the root's connection flags of the same names for this
	// command: here they are what to store, not what to connect with.
	fl := cmd.Flags()
	fl.StringVar(&x.Hub, "hub", "", "hub address host:port")
	fl.StringVar(&x.CA, "ca", "", "CA bundle (PEM) that signs the hub's certificate")
	fl.StringVar(&x.ServerName, "server-name", "", "name to verify in the hub's certificate")
	fl.StringVar(&x.ClientID, "client-id", "", "operator client id in the hub's roster")
	fl.StringVar(&x.Key, "key", "", "private key (PKCS#8 PEM) for client assertions")
	fl.StringVar(&x.KID, "kid", "", "key id in the roster (default: the key's thumbprint)")
	fl.StringVar(&x.Audience, "audience", "", "the hub's audience (default "+DefaultAudience+")")
	fl.StringVar(&x.TLSClientCert, "tls-client-cert", "", "client certificate for mutual TLS")
	fl.StringVar(&x.TLSClientKey, "tls-client-key", "", "client certificate key for mutual TLS")
	fl.BoolVar(&x.Plaintext, "plaintext", false, "no TLS (development hub)")
	fl.BoolVar(&x.NoAuth, "no-auth", false, "no client assertion (development hub)")
	fl.BoolVar(&use, "use", false, "also make it the current context")
	return cmd
}

// setContext creates or changes the context name in cfg from the fields of
// x whose flags were given (changed reports a flag given); use also makes
// it current. It returns the line
// to print once the file is saved.
func setContext(cfg *Config, changed func(flag string) bool, name string, x Context, use bool) (string, error) {
	cur, existed := cfg.Context(name)
	cur.Name = name
	set := func(flag string, dst *string, v string) {
		if changed(flag) {
			*dst = v
		}
	}
	set("hub", &cur.Hub, x.Hub)
	set("ca", &cur.CA, absPath(x.CA))
	set("server-name", &cur.ServerName, x.ServerName)
	set("client-id", &cur.ClientID, x.ClientID)
	set("key", &cur.Key, absPath(x.Key))
	set("kid", &cur.KID, x.KID)
	set("audience", &cur.Audience, x.Audience)
	set("tls-client-cert", &cur.TLSClientCert, absPath(x.TLSClientCert))
	set("tls-client-key", &cur.TLSClientKey, absPath(x.TLSClientKey))
	if changed("plaintext") {
		cur.Plaintext = x.Plaintext
	}
	if changed("no-auth") {
		cur.NoAuth = x.NoAuth
	}
	if cur.Hub == "" {
		return "", usageErrf("context %q needs --hub HOST:PORT", name)
	}
	cfg.SetContext(cur)
	if use {
		cfg.CurrentContext = cur.Name
	}
	verb := "created"
	if existed {
		verb = "updated"
	}
	done := fmt.Sprintf("context %q %s in %s", cur.Name, verb, cfg.Path())
	if use {
		done += " and made current"
	}
	return done, nil
}

func (a *app) newDeleteContext() *cobra.Command {
	return &cobra.Command{
		Use:               "delete-context NAME",
		Short:             "Remove a context (the files it names are left alone)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeContexts,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.changeConfig(func(cfg *Config) (string, error) {
				if !cfg.DeleteContext(args[0]) {
					return "", &Error{Code: ExitNotFound, Msg: fmt.Sprintf("no context %q in %s", args[0], cfg.Path())}
				}
				return fmt.Sprintf("deleted context %q", args[0]), nil
			})
		},
	}
}
