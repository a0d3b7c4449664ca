//! Description compression levels, each a pure function tool → tool.
