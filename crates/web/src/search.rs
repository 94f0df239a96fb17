//! Web-search providers behind one trait, with normalised results.
