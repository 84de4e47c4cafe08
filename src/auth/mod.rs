//! Who is calling: identities from bearer tokens, JWTs and client certificates, the roles they
//! hold, and the check each route makes. Only the HTTP edge (`api`) asks these questions; the
//! engines below it never see a caller.

/// The names a verified client certificate carries, in the order they are tried as the
/// caller's identity: URI SANs (SPIFFE ids), then DNS SANs, then the subject's CN.
///
/// The TLS listener inserts it into each request's extensions for connections whose client
/// presented a certificate that chains to `server.tls.client_ca`; a request without it came
/// over plain TCP or without a client certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientCertNames(pub Vec<String>);
