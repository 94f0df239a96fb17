//! The SSRF guard: which URLs and addresses may be fetched.
