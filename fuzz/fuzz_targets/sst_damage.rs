#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tierkv_fuzz::engine::sst_damage(data, &tierkv_fuzz::scratch());
});
