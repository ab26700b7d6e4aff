"""Benchmarks built into Corral, each run by its module name: ``corral run
corral.benchmarks.humaneval --base-url URL --model NAME``."""
