// Package web serves the hub's fleet view: a small server-rendered web UI
// (html/template, assets embedded with embed, a few lines of vanilla
// JavaScript for progressive enhancement, no build step) on its own HTTP
// listener, off unless Config.Addr is set.
//
// Pages (docs/reference/web.md):
//
//   - GET /            the fleet at a glance: a site × operational_status
//     matrix of device counts (each cell links to the filtered device list)
//     and the sites with link state, last seen and a stale marker;
//   - GET /devices     the device list with ListDevices' filters (site,
//     status, impairment, orphaned, health warning, removed), a name search and a selector
//     in the CLI's syntax (internal/devsel), sorted by name or any column,
//     keyset-paged on (column, id); POST /devices/bulk/preview and POST
//     /devices/bulk quarantine or release the ticked rows or a selector's
//     devices after a preview with the count (bulk.go);
//   - GET /devices/{ref} one device, by id, name, SITE/NAME or id prefix:
//     facts, conditions coloured by meaning, an inline SVG timeline, holds,
//     the release plan, policy decisions, operations, quarantine history,
//     recent commands and, for operations:write, quarantine, release,
//     offer and node actions;
//   - GET /sites/{name}, /operations, /operations/{id}, /commands,
//     /policy, /holds: the site page, operations (start, cancel), commands
//     (retry), the policy (pending actions approve and reject) and holds
//     (set, clear);
//   - GET /commands/{id} a command's progress (PENDING → SENT → SUCCEEDED or
//     FAILED), polled by the page until it is final;
//   - GET /assets/...  the embedded CSS and script;
//   - GET /healthz     the only path served without authentication.
//
// Every page carries a region that the script refreshes in place (a GET of
// the same URL with the header X-Ironlink-Fragment: 1 answers only that
// region), so pages stay current without a full reload; without JavaScript
// the pages and forms still work, they just do not refresh by themselves.
//
// Authentication uses the hub's roster identities, in one of two modes
// (Config.Auth):
//
//   - "mtls": the listener speaks TLS with the hub's certificate and asks
//     for a client certificate; the certificate's public key must equal a
//     roster key of an operator (the roster is the trust anchor, as for the
//     gRPC API's client assertions, so a self-signed certificate over the
//     operator's key is enough; the TLS handshake proves possession of the
//     private key);
//   - "proxy": an authenticating reverse proxy in front (oauth2-proxy, or the
//     demo's token proxy, DemoProxy) names the roster client in a header
//     (default X-Forwarded-User); the header is believed only from
//     Config.TrustedProxies addresses, or from anyone on a unix-socket
//     listener (whose file mode is the access control).
//
// An identity needs operations:read for every page and operations:write to
// see any control; a POST without operations:write is refused with 403
// naming the scope (writeForm) and writes nothing. Cross-site POSTs are refused
// (net/http CrossOriginProtection: Sec-Fetch-Site, else Origin vs Host).
//
// Reads go through hub/fleet's Server (the public API's own handlers and
// validation) wherever the API answers the question; the reads it has no RPC
// for (counts per site and status, the device list with its name search,
// condition history, site names) are read-only SQL in queries.go, each one
// statement whatever the fleet's size. Writes go only through the API's own
// handlers (FleetService, BulkService, OperationService, PolicyService),
// with the caller's identity in the context, so the actor recorded is the
// roster client id and the checks and messages are the API's.
//
// This package must not import satellite/ packages.
package web
