//! The planner: catalog + counts + profile + policy → the least lossy exposure that fits.
