package auth

// DefaultAudience is the JWT audience ("aud") the hub expects and clients
// address when none is configured: the hub's --audience, the satellite's
// --audience, `ironlink-hub token` and the ironlink CLI default to it.
const DefaultAudience = "ironlink-hub"
