//! Tests of the record batch format.
