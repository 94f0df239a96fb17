//! Fetching a URL: pinned DNS through the guard, redirects re-checked hop by hop, size and time caps, charset decoding.
