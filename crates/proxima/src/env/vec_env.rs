//! Vector environments (being written).
