package ctl

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/tlsutil"
)

// assertionLifetime is the lifetime of each assertion the CLI signs: one
// call's worth, well under the hub's 5-minute maximum.
const assertionLifetime = time.Minute

// Settings are the effective connection settings of one invocation: the
// selected context with environment variables and flags applied.
type Settings struct {
	// ContextName is the context used ("" when everything came from flags
	// or the environment).
	ContextName string
	// ConfigPath is the config file consulted.
	ConfigPath string
	Context
}

// connFlags are the root command's connection flags (empty: not given).
type connFlags struct {
	config, context, hub, ca, clientID, key, audience, serverName string
	plaintext, noAuth                                             bool
}

// resolveSettings picks the context (--context, $IRONLINK_CONTEXT, then
// current-context) and applies the environment and flags over it. Errors
// (usage): an unknown context, a malformed config, nothing to connect to.
func resolveSettings(f connFlags, getenv func(string) string) (Settings, error) {
	path := f.config
	if path == "" {
		var err error
		if path, err = DefaultConfigPath(getenv); err != nil {
			return Settings{}, usageErr(err)
		}
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		return Settings{}, usageErr(err)
	}
	s := Settings{ConfigPath: path}
	name := first(f.context, getenv(EnvContext), cfg.CurrentContext)
	if name != "" {
		x, ok := cfg.Context(name)
		if !ok {
			return Settings{}, usageErrf("no context %q in %s (contexts: %s): see `ironlink config get-contexts`", name, path, contextNames(cfg))
		}
		x.CA, x.Key = cfg.resolvePath(x.CA), cfg.resolvePath(x.Key)
		x.TLSClientCert, x.TLSClientKey = cfg.resolvePath(x.TLSClientCert), cfg.resolvePath(x.TLSClientKey)
		s.Context, s.ContextName = x, name
	}
	s.Hub = first(f.hub, getenv(EnvHub), s.Hub)
	s.CA = first(absPath(f.ca), absPath(getenv(EnvCA)), s.CA)
	s.ClientID = first(f.clientID, getenv(EnvClientID), s.ClientID)
	s.Key = first(absPath(f.key), absPath(getenv(EnvKey)), s.Key)
	s.Audience = first(f.audience, getenv(EnvAudience), s.Audience, DefaultAudience)
	s.ServerName = first(f.serverName, s.ServerName)
	s.Plaintext = s.Plaintext || f.plaintext
	s.NoAuth = s.NoAuth || f.noAuth
	switch {
	case s.Hub == "" && len(cfg.Contexts) == 0:
		return Settings{}, usageErrf("no hub to talk to: %s has no contexts. Create one:\n  ironlink config set-context NAME --hub HOST:PORT --ca CA.pem --client-id ID --key KEY.pem --use\n(`make demo` prints a ready one), or give --hub, --ca, --client-id and --key", path)
	case s.Hub == "":
		return Settings{}, usageErrf("no context selected and no --hub: choose one with `ironlink config use-context NAME` (contexts: %s) or --context NAME", contextNames(cfg))
	case !s.NoAuth && (s.ClientID == "" || s.Key == ""):
		return Settings{}, usageErrf("context %q has no client-id or key: set them with `ironlink config set-context %s --client-id ID --key KEY.pem` (or --client-id/--key)", s.ContextName, orDash(s.ContextName))
	}
	return s, nil
}

// absPath makes a path given on the command line or in the environment
// absolute (relative to the current directory); "" stays "".
func absPath(p string) string {
	if p == "" {
		return ""
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

func contextNames(c *Config) string {
	var n []string
	for _, x := range c.Contexts {
		n = append(n, x.Name)
	}
	if len(n) == 0 {
		return "none"
	}
	return strings.Join(n, ", ")
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// dial connects to the hub of s: TLS verified with s.CA (unless
// Plaintext) and a fresh client assertion per RPC (unless NoAuth).
func dial(s Settings) (*grpc.ClientConn, error) {
	var opts []grpc.DialOption
	if s.Plaintext {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	} else {
		tc, err := tlsutil.ClientConfig(s.CA, s.TLSClientCert, s.TLSClientKey, s.ServerName)
		if err != nil {
			return nil, usageErrf("TLS settings of context %s: %v", orDash(s.ContextName), err)
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	}
	if !s.NoAuth {
		key, err := auth.LoadPrivateKey(s.Key)
		if err != nil {
			return nil, usageErrf("client key of context %s: %v (the key is the file `ironlink-hub keygen --out` wrote)", orDash(s.ContextName), err)
		}
		kid := s.KID
		if kid == "" {
			if kid, err = auth.Thumbprint(key.Public()); err != nil {
				return nil, usageErrf("client key %s: %v", s.Key, err)
			}
		}
		opts = append(opts, grpc.WithPerRPCCredentials(&auth.ClientCredentials{
			Key: key, KID: kid, ClientID: s.ClientID, Audience: s.Audience, Lifetime: assertionLifetime, Insecure: s.Plaintext}))
	}
	opts = append(opts, grpc.WithChainUnaryInterceptor(utf8Unary, RetryRateLimited), grpc.WithChainStreamInterceptor(utf8Stream))
	cc, err := grpc.NewClient(s.Hub, opts...)
	if err != nil {
		return nil, usageErrf("hub address %q: %v", s.Hub, err)
	}
	return cc, nil
}

// utf8Unary refuses a request holding a string that is not valid UTF-8
// (from an argument or flag) as a usage error naming the field, before
// anything is sent: grpc-go would fail to marshal it and report Internal.
func utf8Unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if err := checkUTF8(req); err != nil {
		return err
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// rateLimitRetries is how often a call the hub refused for the caller's
// rate limit is sent again.
const rateLimitRetries = 5

// RetryRateLimited is a grpc.UnaryClientInterceptor that sends a call
// again, after the RetryInfo delay (clamped to 10 ms–5 s), when the hub
// refused it for the caller's rate limit (ResourceExhausted RATE_LIMITED:
// the refusal comes before the handler, so nothing was done and a write is
// safe to resend), at most rateLimitRetries (5) times and within ctx. It
// returns the last attempt's error, or ctx's refusal unchanged when ctx
// ends first. docs/reference/access.md documents the refusal.
func RetryRateLimited(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	for attempt := 0; ; attempt++ {
		err := invoker(ctx, method, req, reply, cc, opts...)
		delay, limited := rateLimitDelay(err)
		if !limited || attempt == rateLimitRetries {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// rateLimitDelay reports whether err is the hub's rate-limit refusal and
// how long it asks to wait (at least 10ms, at most 5s).
func rateLimitDelay(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted {
		return 0, false
	}
	if ei := errorInfo(st); ei == nil || ei.GetReason() != reasonRateLimited {
		return 0, false
	}
	d := 100 * time.Millisecond
	for _, x := range st.Details() {
		if ri, ok := x.(*errdetails.RetryInfo); ok {
			d = ri.GetRetryDelay().AsDuration()
		}
	}
	return min(max(d, 10*time.Millisecond), 5*time.Second), true
}

// reasonRateLimited is the ErrorInfo reason of the hub's per-client rate
// limit (ResourceExhausted with RetryInfo).
const reasonRateLimited = "RATE_LIMITED"

// utf8Stream is utf8Unary for the messages a stream sends.
func utf8Stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return utf8CheckedStream{s}, nil
}

type utf8CheckedStream struct{ grpc.ClientStream }

func (s utf8CheckedStream) SendMsg(m any) error {
	if err := checkUTF8(m); err != nil {
		return err
	}
	return s.ClientStream.SendMsg(m)
}

// checkUTF8 returns a usage *Error for the first string field of m (a
// proto message) that is not valid UTF-8, else nil.
func checkUTF8(m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil
	}
	if path, bad := invalidUTF8Field(pm.ProtoReflect(), ""); bad {
		return usageErrf("%s is not valid UTF-8: give text in UTF-8 (nothing was sent)", path)
	}
	return nil
}

func invalidUTF8Field(m protoreflect.Message, prefix string) (path string, bad bool) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := prefix + string(fd.Name())
		check := func(name string, v protoreflect.Value, kind protoreflect.Kind) bool {
			switch kind {
			case protoreflect.StringKind:
				if !utf8.ValidString(v.String()) {
					path, bad = name, true
				}
			case protoreflect.MessageKind, protoreflect.GroupKind:
				path, bad = invalidUTF8Field(v.Message(), name+".")
			}
			return bad
		}
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				if check(fmt.Sprintf("%s[%d]", name, i), l.Get(i), fd.Kind()) {
					return false
				}
			}
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				if !utf8.ValidString(k.String()) {
					path, bad = name+" key", true
					return false
				}
				return !check(name+"["+k.String()+"]", mv, fd.MapValue().Kind())
			})
		default:
			check(name, v, fd.Kind())
		}
		return !bad
	})
	return path, bad
}

// client is one invocation's connection to the hub.
type client struct {
	settings Settings
	fleet    ironlinkv1.FleetServiceClient
	ops      ironlinkv1.OperationServiceClient
	policy   ironlinkv1.PolicyServiceClient
	bulk     ironlinkv1.BulkServiceClient
	// remediation: ladders and repair handoffs (remediation.go).
	remediation ironlinkv1.RemediationServiceClient
	// hw: hardware history, drift and validation runs (hardware.go).
	hw      ironlinkv1.HardwareServiceClient
	timeout time.Duration
	close   func() error
}

// call bounds one RPC by the request timeout.
func (c *client) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// explain turns an RPC error into an *Error with an exit code and a message
// that says what to do.
func (c *client) explain(err error) error {
	var e *Error
	if err == nil || errors.As(err, &e) {
		return err
	}
	if errors.Is(err, context.Canceled) {
		return &Error{Code: ExitError, Msg: "interrupted"}
	}
	if errors.Is(err, errStreamEnded) {
		return c.unavailable(err.Error())
	}
	st, ok := status.FromError(err)
	if !ok {
		return &Error{Code: ExitError, Msg: err.Error()}
	}
	s := c.settings
	msg := st.Message()
	switch st.Code() {
	case codes.Unauthenticated:
		return &Error{Code: ExitAuth, Msg: fmt.Sprintf("the hub refused the key: is client %s in the roster with this key (%s)? hub said: %s", s.ClientID, s.Key, msg)}
	case codes.PermissionDenied:
		return &Error{Code: ExitAuth, Msg: fmt.Sprintf("client %s may not do this: %s (give it the scope in the hub's roster: operations:read to look, operations:write to quarantine and release)", s.ClientID, msg)}
	case codes.Unavailable:
		return c.unavailable(msg)
	case codes.DeadlineExceeded:
		return &Error{Code: ExitUnreachable, Msg: fmt.Sprintf("the hub at %s did not answer within %s (--request-timeout)", s.Hub, c.timeout)}
	case codes.NotFound:
		return &Error{Code: ExitNotFound, Msg: msg}
	case codes.FailedPrecondition:
		switch ei := errorInfo(st); {
		case ei != nil && ei.GetReason() == reasonDeviceQuarantined:
			return &Error{Code: ExitRefused, Msg: msg + "\n(release it first, or pass --force: the override is recorded)"}
		case ei != nil && ei.GetReason() == reasonNodeInUse:
			return &Error{Code: ExitRefused, Msg: msg + "\n(to take that node over on purpose, pass --force: the override is recorded)"}
		case ei != nil && ei.GetReason() == reasonHeldByOthers:
			// the hub names the API field; the CLI's is the flag
			return &Error{Code: ExitRefused, Msg: strings.Replace(msg, "(all_holds)", "(--all-holds)", 1)}
		}
		return &Error{Code: ExitRefused, Msg: msg}
	case codes.ResourceExhausted:
		if _, limited := rateLimitDelay(err); limited {
			return &Error{Code: ExitError, Msg: fmt.Sprintf("the hub's rate limit for client %s still refused the call after %d retries: %s (slow down, or ask for a higher --operator-rate)", s.ClientID, rateLimitRetries, msg)}
		}
	case codes.InvalidArgument:
		if ei := errorInfo(st); ei != nil && ei.GetReason() == reasonDeviceNameAmbiguous {
			return &Error{Code: ExitUsage, Msg: msg + "\n(name the site: --site SITE or SITE/NAME, or use the UUID)"}
		}
		return &Error{Code: ExitUsage, Msg: msg}
	}
	return &Error{Code: ExitError, Msg: fmt.Sprintf("%s: %s", st.Code(), msg)}
}

// unavailable explains an Unavailable with message msg: the hub's
// certificate was refused, the hub cannot be reached, or it answered
// Unavailable (retry).
func (c *client) unavailable(msg string) *Error {
	s := c.settings
	switch {
	case strings.Contains(msg, "x509:") || strings.Contains(msg, "certificate"):
		return &Error{Code: ExitUnreachable, Msg: fmt.Sprintf("cannot verify the hub's certificate at %s with CA %s: %s (is `ca` in the context the hub's CA?)", s.Hub, orDash(s.CA), msg)}
	case strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host") || strings.Contains(msg, "connection error"):
		return &Error{Code: ExitUnreachable, Msg: fmt.Sprintf("cannot reach the hub at %s: %s (is it running? is `hub` in context %s right?)", s.Hub, msg, orDash(s.ContextName))}
	}
	if !strings.Contains(msg, "retry") {
		msg += " (retry)"
	}
	return &Error{Code: ExitUnreachable, Msg: fmt.Sprintf("the hub at %s is unavailable: %s", s.Hub, msg)}
}

// reasonDeviceNameAmbiguous is the ErrorInfo reason of a device name that
// several devices share (fleet.proto, "Naming a device").
const reasonDeviceNameAmbiguous = "DEVICE_NAME_AMBIGUOUS"

// reasonDeviceQuarantined is the ErrorInfo reason of an operation refused
// because it would offer a quarantined device to customers
// (operations.proto, StartOperation).
const reasonDeviceQuarantined = "DEVICE_QUARANTINED"

// reasonNodeInUse is the ErrorInfo reason of an ENROL refused because the
// site already has a node of that name past manageable (operations.proto,
// StartOperation).
const reasonNodeInUse = "NODE_IN_USE"

func errorInfo(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return ei
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// reasonHeldByOthers is the ErrorInfo reason of a release by a caller
// holding none of the device's quarantine holds (fleet.proto,
// ReleaseDevice).
const reasonHeldByOthers = "HELD_BY_OTHERS"
