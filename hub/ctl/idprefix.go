package ctl

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// Operations and commands are named by their UUID or, as tables show them
// (8 characters), by a unique prefix of it: the CLI lists them and picks
// the one id that starts with the prefix. An ambiguous prefix is a usage
// error listing the candidates; a malformed id or prefix is a usage error,
// never sent to the hub.

// minIDPrefix is the shortest prefix accepted (git's abbreviations too
// start at 4).
const minIDPrefix = 4

// maxPrefixScan bounds the ids a prefix is looked up among (newest first).
const maxPrefixScan = 20000

// maxCandidates is how many matches an ambiguity error lists.
const maxCandidates = 10

// idKind names what an id identifies, for messages and listing.
type idKind struct {
	// what is "operation" or "command"; list is the CLI command that lists them.
	what, list string
	// ids lists ids newest first, one page per call: the page's ids, the next
	// page token ("" on the last page).
	ids func(ctx context.Context, c *client, token string) ([]string, string, error)
}

var operationIDKind = idKind{what: "operation", list: "ironlink get operations",
	ids: func(ctx context.Context, c *client, token string) ([]string, string, error) {
		cctx, cancel := c.call(ctx)
		defer cancel()
		r, err := c.ops.ListOperations(cctx, &ironlinkv1.ListOperationsRequest{PageSize: 1000, PageToken: token})
		if err != nil {
			return nil, "", err
		}
		ids := make([]string, len(r.GetOperations()))
		for i, o := range r.GetOperations() {
			ids[i] = o.GetOperationId()
		}
		return ids, r.GetNextPageToken(), nil
	}}

var commandIDKind = idKind{what: "command", list: "ironlink get commands",
	ids: func(ctx context.Context, c *client, token string) ([]string, string, error) {
		cctx, cancel := c.call(ctx)
		defer cancel()
		r, err := c.fleet.ListCommands(cctx, &ironlinkv1.ListCommandsRequest{PageSize: 1000, PageToken: token})
		if err != nil {
			return nil, "", err
		}
		ids := make([]string, len(r.GetCommands()))
		for i, cm := range r.GetCommands() {
			ids[i] = cm.GetCommandId()
		}
		return ids, r.GetNextPageToken(), nil
	}}

// checkIDPrefix says whether arg is a full UUID (canonical form returned)
// or a plausible prefix of one; anything else is a usage error.
func checkIDPrefix(k idKind, arg string) (full string, prefix string, err error) {
	s := strings.ToLower(strings.TrimSpace(arg))
	if u, perr := uuid.Parse(s); perr == nil && len(s) == 36 {
		return u.String(), "", nil
	}
	if len(s) < minIDPrefix || len(s) >= 36 || strings.Trim(s, "0123456789abcdef-") != "" {
		return "", "", usageErrf("%s id %q is not a UUID nor a prefix of one (at least %d hex digits, as `%s` shows them)", k.what, arg, minIDPrefix, k.list)
	}
	return "", s, nil
}

// resolveID turns arg (a UUID or a unique prefix of one) into the full id.
// Errors: usage (malformed, ambiguous: the candidates listed), not found.
func (c *client) resolveID(ctx context.Context, k idKind, arg string) (string, error) {
	full, prefix, err := checkIDPrefix(k, arg)
	if err != nil || full != "" {
		return full, err
	}
	matches, err := c.idsWithPrefix(ctx, k, prefix, maxCandidates+1)
	if err != nil {
		return "", c.explain(err)
	}
	switch len(matches) {
	case 0:
		return "", &Error{Code: ExitNotFound, Msg: fmt.Sprintf("no %s id starts with %q (see `%s`)", k.what, prefix, k.list)}
	case 1:
		return matches[0], nil
	}
	more := ""
	if len(matches) > maxCandidates {
		matches, more = matches[:maxCandidates], ", ..."
	}
	return "", usageErrf("%s id prefix %q is ambiguous: it matches %s%s (give more characters)", k.what, prefix, strings.Join(matches, ", "), more)
}

// idsWithPrefix returns up to limit ids of kind k starting with prefix,
// newest first, looking at most at maxPrefixScan ids.
func (c *client) idsWithPrefix(ctx context.Context, k idKind, prefix string, limit int) ([]string, error) {
	var out []string
	token := ""
	for seen := 0; seen < maxPrefixScan; {
		ids, next, err := k.ids(ctx, c, token)
		if err != nil {
			return nil, err
		}
		seen += len(ids)
		for _, id := range ids {
			if strings.HasPrefix(id, prefix) {
				out = append(out, id)
				if len(out) >= limit {
					return out, nil
				}
			}
		}
		if token = next; token == "" {
			break
		}
	}
	return out, nil
}

// resolveIDs resolves every argument before anything is sent, so a bad
// third id changes nothing.
func (c *client) resolveIDs(ctx context.Context, k idKind, args []string) ([]string, error) {
	out := make([]string, len(args))
	for i, a := range args {
		id, err := c.resolveID(ctx, k, a)
		if err != nil {
			return nil, err
		}
		out[i] = id
	}
	return out, nil
}

// completeIDs completes ids of kind k by prefix (newest first, at most
// 200), for shell completion.
func (a *app) completeIDs(k idKind) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		c, err := a.connect()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		ids, err := c.idsWithPrefix(ctx, k, strings.ToLower(toComplete), 200)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return ids, cobra.ShellCompDirectiveNoFileComp
	}
}
