//! The binary tells mimalloc to keep freed pages by the place of `mi_option_purge_delay` in
//! mimalloc's option list (src/main.rs), as the crate names no constant for it. This test
//! fails if an upgrade of libmimalloc-sys moves the option: the place must hold the purge
//! delay's default, 1000 ms in the mimalloc v3 that libmimalloc-sys 0.1.49 builds (its
//! `options.c`; no other option of that build defaults to 1000).

/// The place src/main.rs sets.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

#[test]
fn the_purge_delay_is_where_the_binary_sets_it() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return; // the environment overrides the default this test reads
    }
    let main_rs = include_str!("../src/main.rs");
    assert!(
        main_rs.contains("const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;"),
        "src/main.rs sets another place than this test checks"
    );
    // SAFETY: reads one option; no other thread of this test sets options.
    let delay_ms = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
    assert_eq!(
        delay_ms, 1000,
        "option {MI_OPTION_PURGE_DELAY} is not the purge delay"
    );
}
