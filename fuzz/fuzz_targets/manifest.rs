#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tierkv_fuzz::engine::manifest(data, &tierkv_fuzz::scratch());
});
