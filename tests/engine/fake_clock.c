/*
** fake_clock.c -- clock.h's readings, moved by the tests (fake_clock.h).
*/
#include "fake_clock.h"

#include "clock.h"

static uint64_t cycles;
static uint32_t cpu_id;
static double wall_us, cpu_us, preempt_us;

void fake_advance (double wall, double cpu) {
  wall_us += wall;
  cycles += (uint64_t)(wall * FAKE_CYCLES_PER_US);
  cpu_us += cpu;
}

void fake_preempt_in_cputime (double wall) {
  preempt_us = wall;
}

void fake_cpu (uint32_t cpu) {
  cpu_id = cpu;
}

void pm_clock_init (void) {
}

uint64_t pm_cycles (uint32_t *cpu) {
  *cpu = cpu_id;
  return cycles;
}

void pm_cputime (pm_CpuTime *t) {
  t->cpu_us = cpu_us;
  t->user_us = cpu_us;
  t->system_us = 0;
  fake_advance(preempt_us, 0);
  preempt_us = 0;
}

double pm_wall_us (void) {
  return wall_us;
}

const void *pm_os_thread (void) {
  static char self;
  return &self;
}

double pm_realtime_us (void) {
  return 1.7e15 + wall_us;
}

const char *pm_clock_name (void) {
  return "fake";
}
