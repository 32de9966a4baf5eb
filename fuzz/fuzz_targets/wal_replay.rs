#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tierkv_fuzz::engine::wal_replay(data, &tierkv_fuzz::scratch());
});
