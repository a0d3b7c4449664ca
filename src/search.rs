//! Search over the catalog: the index and the ranking behind `search_tools`.
