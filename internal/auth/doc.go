// Package auth is ironlink's identity and access core, shared by the hub, the
// satellite and the operator tooling.
//
// Every caller of the hub is an OAuth client that authenticates with a
// private-key JWT client assertion (RFC 7523 §2.2 and §3, the OpenID Connect
// "private_key_jwt" client authentication method), sent on every gRPC call as
// "authorization: Bearer <jwt>":
//
//   - Sign mints an assertion (iss = sub = client id, aud, exp, iat, nbf and a
//     random jti), signed with ES256 (P-256), RS256 (RSA ≥ 2048 bits) or EdDSA
//     (Ed25519), the algorithm following from the key type.
//   - ClientCredentials is the grpc credentials.PerRPCCredentials that attaches
//     a fresh assertion to every RPC, so a satellite's long-lived stream
//     re-presents one on every reconnect.
//   - Verifier checks an assertion against the Roster (the clients, their
//     site, scopes and public keys by kid) and a ReplayCache (each jti is
//     accepted once within the token's lifetime, across all hub replicas when
//     the cache is shared), and returns the caller's Identity. A refusal is a
//     *VerifyError whose Check names the failed check and never carries key
//     material or the token.
//   - MethodScopes is authorization as data: the scope every ironlink.v1 RPC
//     needs. PublicServices (health, reflection) are the documented exceptions.
//   - LoadRoster reads the roster YAML (the satellites/operators section of the
//     hub chart's values.yaml); RosterWatcher reloads it on SIGHUP and on file
//     change, keeping the last good roster when a new file is invalid.
//   - GenerateKey, WritePrivateKeyPEM, LoadPrivateKey and PublicKeyPEM handle
//     the key files that `ironlink-hub keygen` writes.
//
// All times are wall-clock time.Time values; JWT NumericDate claims are whole
// seconds since the Unix epoch (RFC 7519 §2).
package auth
