//! The table macro of the matrix tests, in the style of ripgrep's `rgtest!` (`tests/macros.rs`):
//! a matrix is written as one row per cell, so its shape shows at a glance.

/// One test per row `name: group(args…);`: a multi-threaded `#[tokio::test]` named `name`
/// whose whole body is `group(args…).await` (the group holds the assertions). Doc comments and
/// attributes written above a row (`#[ignore = "…"]`) go to that row's test.
macro_rules! cells {
    ($($(#[$attr:meta])* $name:ident: $group:ident($($arg:expr),* $(,)?);)*) => {
        $(
            $(#[$attr])*
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                $group($($arg),*).await;
            }
        )*
    };
}

pub(crate) use cells;
