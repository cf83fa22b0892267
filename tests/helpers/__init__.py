"""Shared test helpers: real faults for real runs (`faults`), the project as another machine installs it
(`installed`), several machines on this one (`hosts`)."""
