// FIXTURE stand-in for cpp/harness.h (tests only)
