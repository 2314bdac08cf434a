// FIXTURE stand-in for cpp/tolerances.h (tests only)
