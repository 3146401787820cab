/*
** engine_test.c -- the engine alone (engine.h), on fake clocks.
**
** No Lua here: the test plays the adapter's part.  It makes groups and
** their sets, opens a monitor as hook.c does, and calls and returns
** through a shadow stack of its own (call/ret below: what hook.c does for
** each Lua call and return).  The clocks move only when a test says
** (fake_clock.h), so every figure the stopwatch computes is checked
** against the exact value the design documents give: shares of a window,
** self against inclusive time, nested-loop cancellation, blocking, the
** histograms and the alerts, and groups' lifetimes.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alert.h"
#include "check.h"
#include "fake_clock.h"
#include "group.h"
#include "mem.h"
#include "source.h"
#include "stopwatch.h"

/*
** {======================================================
** The adapter's part
** =======================================================
*/

static pm_Engine E;

typedef struct Frame {
  const pm_Set *set;
  pm_Ctx *left;
  uint64_t iter;
} Frame;

static Frame stack[64];
static int depth;

static const pm_Set *top_set (void) {
  return depth > 0 ? stack[depth - 1].set : E.empty;
}

/* A call of a function of set s, as the hook sees it. */
static void call (const pm_Set *s) {
  const pm_Set *parent = top_set();
  Frame *f = &stack[depth++];
  f->set = s;
  f->iter = E.iter;
  f->left = s != parent ? pm_sw_enter(&E, s) : NULL;
}

/* Its return. */
static void ret (void) {
  Frame f = stack[--depth];
  if (f.left != NULL)
    pm_sw_leave(&E, f.left, f.iter);
}

static pm_Group *group (const char *name) {
  pm_Group *g = pm_group_new(&E, name, "plugin", 0);
  CHECK(g != NULL);
  return g;
}

/* The set of the functions of an environment (any address will do) that
** groups a and b (or NULL) are attached to. */
static const pm_Set *set_of (const void *table, pm_Group *a, pm_Group *b) {
  pm_Env *e = pm_env_get(&E, table, 1);
  CHECK(e != NULL && pm_env_attach(&E, e, a) == PM_ATTACH_OK);
  if (b != NULL)
    CHECK(pm_env_attach(&E, e, b) == PM_ATTACH_OK);
  return pm_set_for(&E, e, NULL, NULL, NULL);
}

static void monitor (unsigned probes) {
  memset(&E, 0, sizeof(E));
  pm_engine_init(&E, test_alloc, NULL);
  pm_ctx_init(&E);
  E.empty = pm_set_for(&E, NULL, NULL, NULL, NULL);
  pm_sw_probes(&E, probes, 1);
  E.monitors++;
  pm_sw_start(&E);
  depth = 0;
}

/* Closes the monitor and frees everything, as lua_close does: every byte
** perfmon counted comes back. */
static void unmonitor (unsigned probes) {
  pm_sw_probes(&E, probes, -1);
  if (--E.monitors == 0)
    pm_sw_stop(&E);
  pm_chunks_free(&E);
  pm_map_free(&E.known, E.falloc, E.fud);
  CHECK(E.bytes == 0);
}

/* A group's totals once committed (a snapshot outside events), in µs. */
static double cpu (const pm_Group *g) {
  return g->total.cpu.cpu_us;
}

static double self (const pm_Group *g) {
  return g->total.self.cpu_us;
}

/* }====================================================== */

#define JANK PM_BIT(PM_PROBE_JANK)
#define TICKS PM_BIT(PM_PROBE_TICKS)
#define BLOCKING PM_BIT(PM_PROBE_BLOCKING)
#define MEMORY PM_BIT(PM_PROBE_MEMORY)

static char table_a, table_b, table_ab; /* environments' addresses */

/* Two plugins, A and B, each with its environment's set. */
static void plugins (pm_Group **a, const pm_Set **sa, pm_Group **b,
                     const pm_Set **sb) {
  *a = group("A"), *b = group("B");
  *sa = set_of(&table_a, *a, NULL), *sb = set_of(&table_b, *b, NULL);
}

/*
** {======================================================
** The stopwatch
** =======================================================
*/

/* A calls B: both run while B does, each is charged once, and self time
** goes to the innermost frame's groups.  The counter's rate is not known
** yet, so every change of group reads the CPU clock. */
static void test_inclusive_and_self (void) {
  pm_Group *a, *b;
  const pm_Set *sa, *sb;
  monitor(JANK | TICKS);
  plugins(&a, &sa, &b, &sb);
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  call(sa);
  fake_advance(100, 100);
  call(sb);
  fake_advance(300, 300);
  ret();
  fake_advance(100, 100);
  ret();
  CHECK(pm_sw_event_end(&E) == PM_OK);
  pm_sw_snapshot(&E);
  NEAR(cpu(a), 500);
  NEAR(self(a), 200);
  NEAR(cpu(b), 300);
  NEAR(self(b), 300);
  NEAR(E.process.cpu.cpu_us, 500);
  CHECK(a->total.ticks == 1 && b->total.ticks == 1);
  CHECK(E.process.ticks == 1);
  CHECK(a->total.events == 1 && b->total.events == 1);
  unmonitor(JANK | TICKS);
}

/* A -> B -> A: A's stopwatch started once (one tick, charged once), and
** self time follows the innermost frame back into A. */
static void test_recursion (void) {
  pm_Group *a, *b;
  const pm_Set *sa, *sb;
  monitor(JANK | TICKS);
  plugins(&a, &sa, &b, &sb);
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  call(sa);
  fake_advance(10, 10);
  call(sb);
  fake_advance(20, 20);
  call(sa);
  fake_advance(40, 40);
  ret();
  fake_advance(30, 30);
  ret();
  ret();
  CHECK(pm_sw_event_end(&E) == PM_OK);
  pm_sw_snapshot(&E);
  NEAR(cpu(a), 100);
  NEAR(self(a), 50);
  NEAR(cpu(b), 90);
  NEAR(self(b), 50);
  CHECK(a->total.ticks == 1 && b->total.ticks == 1);
  unmonitor(JANK | TICKS);
}

/* A library's code works for the code that called it: A's calls into the
** library L are A's self time and L's inclusive time; L dispatching on its
** own is its own self time, and what it calls back is the callee's, the
** same library context entered on behalf of B, then of A, told apart.  The
** empty set (code of no group) is its caller's too.  Self times still add
** up to the process's. */
static void test_library (void) {
  static char table_l;
  pm_Group *a, *b, *l;
  const pm_Set *sa, *sb, *sl;
  monitor(JANK);
  plugins(&a, &sa, &b, &sb);
  l = pm_group_new(&E, "L", "core", 1);
  CHECK(l != NULL);
  sl = set_of(&table_l, l, NULL);
  CHECK(sl->lib && !sa->lib && E.empty->lib);
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  call(sa); /* A -> L */
  fake_advance(100, 100);
  call(sl);
  fake_advance(300, 300);
  ret();
  ret();
  CHECK(pm_sw_event_end(&E) == PM_OK);
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  call(sl); /* L -> B -> L -> A -> L */
  fake_advance(50, 50);
  call(sb);
  fake_advance(200, 200);
  call(sl);
  fake_advance(70, 70);
  call(sa);
  fake_advance(30, 30);
  call(sl);
  fake_advance(20, 20);
  ret();
  ret();
  ret();
  ret();
  ret();
  CHECK(pm_sw_event_end(&E) == PM_OK);
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  call(sa); /* A -> code of no group */
  fake_advance(10, 10);
  call(E.empty);
  fake_advance(40, 40);
  ret();
  ret();
  CHECK(pm_sw_event_end(&E) == PM_OK);
  pm_sw_snapshot(&E);
  NEAR(cpu(a), 500);
  NEAR(self(a), 500);
  NEAR(cpu(b), 320);
  NEAR(self(b), 270);
  NEAR(cpu(l), 670);
  NEAR(self(l), 50);
  NEAR(E.process.cpu.cpu_us, 820);
  unmonitor(JANK);
}

/* Once the counter's rate is known, a window holds several changes of
** group, and its CPU time is shared by cycles: the thread ran only half of
** the window's wall time (preempted), so each group gets half its cycles'
** worth, inclusive and self alike, and the totals add up. */
static void test_window_shares (void) {
  pm_Group *a, *b;
  const pm_Set *sa, *sb;
  monitor(JANK);
  plugins(&a, &sa, &b, &sb);
  fake_advance(2000, 2000);
  pm_sw_snapshot(&E); /* a window of 2 ms: the rate is measured */
  CHECK(E.cycles_per_us == FAKE_CYCLES_PER_US);
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  call(sa);
  fake_advance(300, 150);
  call(sb);
  fake_advance(100, 50);
  ret();
  ret();
  fake_advance(100, 50); /* the host, in no group */
  CHECK(pm_sw_event_end(&E) == PM_OK);
  pm_sw_snapshot(&E);
  NEAR(cpu(a), 200);
  NEAR(self(a), 150);
  NEAR(cpu(b), 50);
  NEAR(self(b), 50);
  NEAR(E.process.cpu.cpu_us, 2000 + 250);
  NEAR(E.process.cpu.user_us, 2000 + 250);
  unmonitor(JANK);
}

/* A preemption where the thread's CPU clock is read (Linux preempts a
** thread whose slice is spent there) is in no window and no measure of
** the counter's rate.  At a monitor's start, counted in the rate it made
** the rate 6 times too high here, and windows 6 ms long.  At a window's
** end, counted in the next window it was the first group's cycles: B,
** called as A's window ends, would take 500 of the 800 µs of cycles of a
** window where it ran 300 µs of A's 600 after it (the dispatching of
** blame_spec, with A a library and B a plugin). */
static void test_preempted_clock_read (void) {
  pm_Group *a, *b;
  const pm_Set *sa, *sb;
  fake_preempt_in_cputime(10000);
  monitor(JANK);
  plugins(&a, &sa, &b, &sb);
  fake_advance(2000, 2000);
  pm_sw_snapshot(&E);
  CHECK(E.cycles_per_us == FAKE_CYCLES_PER_US);
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  call(sa);
  fake_advance(1200, 1200);
  fake_preempt_in_cputime(500); /* at the end of A's window, B's call */
  call(sb);
  fake_advance(300, 300);
  ret();
  fake_advance(600, 600);
  ret();
  CHECK(pm_sw_event_end(&E) == PM_OK);
  pm_sw_snapshot(&E);
  NEAR(self(b), 300);
  NEAR(cpu(b), 300);
  NEAR(self(a), 1800);
  NEAR(cpu(a), 2100);
  NEAR(E.process.cpu.cpu_us, 2000 + 2100);
  unmonitor(JANK);
}

/* An event shorter than a window's limit leaves the window open: its
** groups' time is estimated at the last window's rate of CPU per cycle,
** and the next snapshot makes the totals exact. */
static void test_open_window (void) {
  pm_Group *a;
  const pm_Set *sa;
  monitor(JANK);
  a = group("A");
  sa = set_of(&table_a, a, NULL);
  fake_advance(2000, 1000); /* half the wall time on the CPU */
  pm_sw_snapshot(&E);
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  call(sa);
  fake_advance(100, 50);
  ret();
  CHECK(pm_sw_event_end(&E) == PM_OK);
  NEAR(a->total.event_us, 50); /* the estimate, at 0.5 µs per µs */
  NEAR(cpu(a), 0); /* still in the open window */
  fake_advance(100, 100);
  pm_sw_snapshot(&E);
  NEAR(cpu(a), 100 * 150.0 / 200); /* its share of the window */
  unmonitor(JANK);
}

/* The host's wait for input between events, off the CPU and unmarked,
** is no group's: a window older than 250 µs at the next event's beginning
** ends there, though it holds no group's cycles, or the event's groups
** would share their CPU time with the wait (A's 1.2 ms, over 1.8 ms of
** cycles: 800 µs, under the histogram's first bucket). */
static void test_idle_before_event (void) {
  pm_Group *a;
  const pm_Set *sa;
  uint64_t window;
  monitor(JANK);
  a = group("A");
  sa = set_of(&table_a, a, NULL);
  fake_advance(2000, 2000);
  pm_sw_snapshot(&E); /* the counter's rate known, the window closed */
  fake_advance(600, 0); /* waiting for input */
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  call(sa);
  fake_advance(1200, 1200);
  ret();
  CHECK(pm_sw_event_end(&E) == PM_OK);
  NEAR(a->total.event_us, 1200);
  CHECK(a->total.durations[0] == 1);
  pm_sw_snapshot(&E);
  NEAR(cpu(a), 1200);
  /* A joins a held window younger than 250 µs: it runs on to 1 ms, as
  ** one that began with A would (no read at A's return), and A shares it
  ** with the 100 µs wait */
  fake_advance(100, 0);
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  call(sa);
  fake_advance(300, 300);
  window = E.window;
  ret();
  CHECK(E.window == window);
  CHECK(pm_sw_event_end(&E) == PM_OK);
  CHECK(E.window == window + 1);
  NEAR(a->total.event_us, 1200 + 300 * 300.0 / 400);
  unmonitor(JANK);
}

/* A nested event loop cancels every measure under way: A, which spun it,
** is charged what it ran before, not the loop's events nor what it runs
** after (its stopwatch is stale).  B, which ran in the nested loop's
** event, is charged that event. */
static void test_nested_loop (void) {
  pm_Group *a, *b;
  const pm_Set *sa, *sb;
  monitor(JANK | TICKS);
  plugins(&a, &sa, &b, &sb);
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  call(sa);
  fake_advance(100, 100);
  CHECK(pm_sw_nested_enter(&E) == PM_OK);
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  call(sb);
  fake_advance(200, 200);
  ret();
  CHECK(pm_sw_event_end(&E) == PM_OK);
  CHECK(pm_sw_nested_leave(&E) == PM_OK);
  fake_advance(50, 50);
  ret();
  CHECK(pm_sw_event_end(&E) == PM_OK);
  pm_sw_snapshot(&E);
  NEAR(cpu(a), 100);
  NEAR(self(a), 100);
  NEAR(cpu(b), 200);
  NEAR(E.process.cpu.cpu_us, 350);
  /* the nested event, and the outer one's stretches before and after */
  CHECK(E.process.ticks == 3);
  unmonitor(JANK | TICKS);
}

/* A declared blocking call: its wall time is A's blocking time, its
** cycles are nobody's CPU time. */
static void test_blocking (void) {
  pm_Group *a;
  const pm_Set *sa;
  monitor(JANK | BLOCKING);
  a = group("A");
  sa = set_of(&table_a, a, NULL);
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  call(sa);
  fake_advance(100, 100);
  CHECK(pm_sw_blocking_begin(&E) == PM_OK);
  fake_advance(1000, 0);
  CHECK(pm_sw_blocking_end(&E) == PM_OK);
  fake_advance(100, 100);
  ret();
  CHECK(pm_sw_event_end(&E) == PM_OK);
  pm_sw_snapshot(&E);
  NEAR(cpu(a), 200);
  NEAR(a->total.blocking_us, 1000);
  NEAR(E.process.blocking_us, 1000);
  CHECK(pm_sw_blocking_end(&E) == PM_EMISUSE);
  unmonitor(JANK | BLOCKING);
}

/* A measure that starts and ends on different CPUs of unsynchronised
** counters is discarded; the process keeps the time. */
static void test_cpu_migration (void) {
  pm_Group *a;
  const pm_Set *sa;
  monitor(JANK);
  a = group("A");
  sa = set_of(&table_a, a, NULL);
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  call(sa);
  fake_advance(100, 100);
  fake_cpu(1);
  ret();
  CHECK(pm_sw_event_end(&E) == PM_OK);
  pm_sw_snapshot(&E);
  fake_cpu(0);
  NEAR(cpu(a), 0);
  NEAR(E.process.cpu.cpu_us, 100);
  unmonitor(JANK);
}

/* A thread switch: A runs in one thread, then a coroutine whose frames
** are in A (its resumer) and then B.  The contexts of its frames are made
** without a change, and one change, one clock read, goes from A's to the
** top one: A runs on, B starts, and B's start counts as a tick.  Back in
** A's context, A alone runs.  (The counter's rate is measured first: till
** then every change ends a window, which reads the counter again.) */
static void test_switch (void) {
  pm_Group *a, *b;
  const pm_Set *sa, *sb;
  pm_Ctx *ca, *cb;
  uint64_t reads;
  monitor(JANK | TICKS);
  plugins(&a, &sa, &b, &sb);
  fake_advance(2000, 2000);
  pm_sw_snapshot(&E);
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  call(sa);
  ca = E.ctx;
  fake_advance(100, 100);
  reads = E.cycle_reads;
  cb = pm_sw_child(&E, pm_sw_child(&E, ca, sa), sb);
  pm_sw_change(&E, cb);
  CHECK(E.cycle_reads == reads + 1);
  fake_advance(50, 50);
  pm_sw_change(&E, ca);
  fake_advance(20, 20);
  ret();
  CHECK(pm_sw_event_end(&E) == PM_OK);
  pm_sw_snapshot(&E);
  NEAR(cpu(a), 170);
  NEAR(self(a), 120);
  NEAR(cpu(b), 50);
  NEAR(self(b), 50);
  CHECK(a->total.ticks == 1 && b->total.ticks == 1);
  unmonitor(JANK | TICKS);
}

/* The memory probe: what is allocated while A runs is A's, and its self
** allocation while it is innermost. */
static void test_memory (void) {
  pm_Group *a, *b;
  const pm_Set *sa, *sb;
  monitor(JANK | MEMORY);
  plugins(&a, &sa, &b, &sb);
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  call(sa);
  E.allocs.bytes += 100, E.allocs.count += 1;
  call(sb);
  E.allocs.bytes += 40, E.allocs.count += 2;
  ret();
  ret();
  CHECK(pm_sw_event_end(&E) == PM_OK);
  pm_sw_snapshot(&E);
  CHECK(a->total.alloc.bytes == 140 && a->total.alloc.count == 3);
  CHECK(a->total.self_alloc.bytes == 100 && a->total.self_alloc.count == 1);
  CHECK(b->total.alloc.bytes == 40 && b->total.self_alloc.bytes == 40);
  unmonitor(JANK | MEMORY);
}

/* }====================================================== */

/*
** {======================================================
** Histograms and alerts
** =======================================================
*/

/* An event of 3 ms in A (2.5 ms of it self) and 0.5 ms in B, with the
** watcher's threshold at 1 ms and input just before: A's histogram counts
** it in the >= 1 ms and >= 2 ms buckets, A alone is alerted, visibly. */
static void test_jank_alert (void) {
  pm_Group *a, *b;
  const pm_Set *sa, *sb;
  monitor(JANK);
  plugins(&a, &sa, &b, &sb);
  pm_alert_thresholds(&E, 1, 1000, 0, 16000, 0);
  pm_alert_input(&E);
  fake_advance(10, 10);
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  call(sa);
  fake_advance(1000, 1000);
  call(sb);
  fake_advance(500, 500);
  ret();
  fake_advance(1500, 1500);
  ret();
  CHECK(pm_sw_event_end(&E) == PM_OK);
  CHECK(a->total.events == 1);
  CHECK(a->total.durations[0] == 1 && a->total.durations[1] == 1 &&
        a->total.durations[2] == 0);
  CHECK(a->total.self_durations[0] == 1 && a->total.self_durations[1] == 1);
  NEAR(a->total.event_us, 3000);
  NEAR(a->total.self_event_us, 2500);
  CHECK(b->total.events == 1 && b->total.durations[0] == 0);
  CHECK(E.alerts_pending == 1);
  CHECK(a->alert_reason == PM_ALERT_JANK && b->alert_reason == PM_ALERT_NONE);
  NEAR(a->alert_jank, 3000);
  NEAR(a->alert_self, 2500);
  CHECK(a->alert_count == 1 && a->alert_self_count == 1 && a->alert_visible);
  CHECK(E.process.durations[0] == 1 && E.process.durations[1] == 1);
  pm_alert_clear(&E);
  CHECK(E.alerts_pending == 0 && a->alert_reason == PM_ALERT_NONE);
  unmonitor(JANK);
}

/* A dispatcher A that runs 0.5 ms itself and calls B for 2.5 ms, twice,
** with the threshold at 1 ms: on self time (the default) B alone is
** alerted, twice; on inclusive time A too, with no event janked on its
** own time. */
static void run_dispatch (const pm_Set *sa, const pm_Set *sb) {
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  call(sa);
  fake_advance(500, 500);
  call(sb);
  fake_advance(2500, 2500);
  ret();
  ret();
  CHECK(pm_sw_event_end(&E) == PM_OK);
}

static void test_alert_on_self (void) {
  pm_Group *a, *b;
  const pm_Set *sa, *sb;
  monitor(JANK);
  plugins(&a, &sa, &b, &sb);
  pm_alert_thresholds(&E, 1, 1000, 0, 16000, 0);
  run_dispatch(sa, sb);
  run_dispatch(sa, sb);
  CHECK(E.alerts_pending == 1);
  CHECK(a->alert_reason == PM_ALERT_NONE && b->alert_reason == PM_ALERT_JANK);
  CHECK(b->alert_count == 2 && b->alert_self_count == 2);
  NEAR(b->alert_self, 2500);
  NEAR(a->alert_jank, 3000); /* the highest figures are kept all the same */
  NEAR(a->alert_self, 500);
  pm_alert_clear(&E); /* taken */
  pm_alert_thresholds(&E, 1, 1000, 0, 16000, 1);
  run_dispatch(sa, sb);
  CHECK(E.alerts_pending == 2);
  CHECK(a->alert_reason == PM_ALERT_JANK && b->alert_reason == PM_ALERT_JANK);
  CHECK(a->alert_count == 1 && a->alert_self_count == 0);
  CHECK(b->alert_count == 1 && b->alert_self_count == 1);
  pm_alert_thresholds(&E, 0, 0, 0, 0, 0);
  unmonitor(JANK);
}

/* Jank without input or animation is not visible; no listener, no
** alert. */
static void test_invisible_and_unwatched (void) {
  pm_Group *a;
  const pm_Set *sa;
  monitor(JANK);
  a = group("A");
  sa = set_of(&table_a, a, NULL);
  pm_alert_thresholds(&E, 1, 1000, 0, 16000, 0);
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  call(sa);
  fake_advance(1500, 1500);
  ret();
  CHECK(pm_sw_event_end(&E) == PM_OK);
  CHECK(a->alert_reason == PM_ALERT_JANK && !a->alert_visible);
  pm_alert_thresholds(&E, 0, 0, 0, 0, 0); /* the last listener goes */
  CHECK(E.alerts_pending == 0 && a->alert_reason == PM_ALERT_NONE);
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  call(sa);
  fake_advance(1500, 1500);
  ret();
  CHECK(pm_sw_event_end(&E) == PM_OK);
  CHECK(E.alerts_pending == 0 && a->total.events == 2);
  unmonitor(JANK);
}

/* }====================================================== */

/*
** {======================================================
** Groups that come and go
** =======================================================
*/

static int spared; /* the id spare() keeps */

static void spare (void *ud) {
  int i;
  (void)ud;
  for (i = 0; i < E.ngroups; i++)
    if (E.groups[i]->id == spared)
      E.groups[i]->dying = 0;
}

/* A group is dead once its last reference goes, and freed by a sweep
** unless something running holds it; ids are never reused. */
static void test_lifetimes (void) {
  pm_Group *a, *b, *c;
  int ida, idb;
  size_t before;
  monitor(JANK);
  a = group("A"), b = group("B");
  ida = a->id, idb = b->id;
  set_of(&table_ab, a, b);
  before = E.bytes;
  pm_group_release(&E, a); /* its handle; its environment still holds it */
  CHECK(!a->dead);
  CHECK(pm_env_detach(&E, pm_env_get(&E, &table_ab, 0), a));
  CHECK(a->dead && pm_group_get(&E, ida) == a);
  pm_group_release(&E, b);
  CHECK(pm_env_detach(&E, pm_env_get(&E, &table_ab, 0), b));
  spared = idb;
  CHECK(pm_groups_sweep(&E, spare, NULL) == 1);
  CHECK(pm_group_get(&E, ida) == NULL && pm_group_get(&E, idb) == b);
  spared = 0;
  CHECK(pm_groups_sweep(&E, spare, NULL) == 1);
  CHECK(pm_group_get(&E, idb) == NULL);
  CHECK(E.bytes < before);
  c = group("C");
  CHECK(c->id > idb);
  unmonitor(JANK);
}

/* Memory runs out interning the 65th set: for the larger array of sets;
** then (the array made) for the set itself; then for the larger index.
** Each time no set is made, every one made stays found, nothing counted
** is lost (unmonitor), and a later try makes it. */
static void test_sets_out_of_memory (void) {
  static const int nth[] = {1, 2, 2}; /* which allocation from now fails */
  static char tables[70];
  const pm_Set *made[70];
  int i, n = 0, ok = 1, k;
  monitor(JANK);
  while (E.nsets < 64) { /* the empty set is one */
    made[n] = set_of(&tables[n], group("G"), NULL);
    n++;
  }
  for (k = 0; k < 3; k++) { /* two groups: a set of one is its group's */
    pm_Env *e = pm_env_get(&E, &tables[n], 1);
    pm_Group *g = group("new"), *g2 = group("new2");
    CHECK(pm_env_attach(&E, e, g) == PM_ATTACH_OK);
    CHECK(pm_env_attach(&E, e, g2) == PM_ATTACH_OK);
    fail_next = nth[k];
    CHECK(pm_set_for(&E, e, NULL, NULL, NULL) == NULL);
    CHECK(fail_next == 0 && E.nsets == 64);
    CHECK(E.setcap == (k == 0 ? 64 : 128));
    for (i = 0; i < n; i++)
      ok &= pm_set_for(&E, pm_env_get(&E, &tables[i], 0), NULL, NULL, NULL) ==
            made[i];
    CHECK(ok);
    CHECK(pm_env_detach(&E, e, g) && pm_env_detach(&E, e, g2));
  }
  CHECK(set_of(&tables[n], group("last"), NULL) != NULL && E.nsets == 65);
  unmonitor(JANK);
}

/* An upvalue seen under one environment belongs to it; under two, to
** none.  The environment record lives while an upvalue names it. */
static void test_upvalue_links (void) {
  static char uv1, uv2, uv3; /* upvalues' identities */
  pm_Env *a, *b;
  size_t before;
  monitor(JANK);
  a = pm_env_get(&E, &table_a, 1);
  b = pm_env_get(&E, &table_b, 1);
  CHECK(pm_env_link(&E, &uv1, a) && pm_env_link(&E, &uv1, a));
  CHECK(pm_env_link(&E, &uv2, a) && pm_env_link(&E, &uv2, b));
  CHECK(pm_env_link(&E, &uv3, b));
  CHECK(pm_env_of_upvalue(&E, &uv1) == a);
  CHECK(pm_env_of_upvalue(&E, &uv2) == NULL);
  CHECK(pm_env_of_upvalue(&E, &uv3) == b);
  CHECK(pm_env_link(&E, &uv2, a) && pm_env_of_upvalue(&E, &uv2) == NULL);
  CHECK(a->refs == 1 && b->refs == 1);
  /* its table is freed (as the allocator wrapper tells): uv1 holds it */
  pm_env_forget(&E, PM_PTR(pm_map_del(&E.known, &table_a)));
  CHECK(pm_env_of_upvalue(&E, &uv1) == a && a->table == NULL);
  before = E.bytes;
  pm_upvalue_forget(&E, pm_map_del(&E.known, &uv1)); /* uv1 is freed */
  CHECK(E.bytes == before - sizeof(pm_Env));
  unmonitor(JANK);
}

/* A fake prototype tree, and pm_proto_walk's walk of it. */
typedef struct Node {
  const struct Node *kids[2];
  int n;
} Node;

static int walk_nodes (const void *root, int (*fn)(const void *p, void *arg),
                       void *arg) {
  const Node *p = root;
  int i;
  if (!fn(p, arg))
    return 0;
  for (i = 0; i < p->n; i++)
    if (!walk_nodes(p->kids[i], fn, arg))
      return 0;
  return 1;
}

/* A tree is keyed from its root, which its record names; a prototype keyed
** before as the root of its own (a stripped function resolved before the
** main function that made it) keeps its record.  A record lives while a
** key names it. */
static void test_chunk_trees (void) {
  static const Node leaf = {{NULL, NULL}, 0};
  static const Node mid = {{&leaf, NULL}, 1};
  static const Node root = {{&mid, NULL}, 1};
  pm_Chunk *m, *r;
  size_t before;
  monitor(JANK);
  m = pm_chunk_tree(&E, &mid, walk_nodes);
  CHECK(m != NULL && m->exact && m->root == &mid && m->refs == 2);
  r = pm_chunk_tree(&E, &root, walk_nodes);
  CHECK(r != NULL && r->exact && r->root == &root && r->refs == 1);
  CHECK(PM_PTR(pm_map_get(&E.known, &leaf)) == m);
  CHECK(PM_PTR(pm_map_get(&E.known, &mid)) == m);
  CHECK(PM_PTR(pm_map_get(&E.known, &root)) == r);
  /* the prototypes are freed, as the allocator wrapper tells */
  before = E.bytes;
  pm_chunk_forget(&E, PM_PTR(pm_map_del(&E.known, &leaf)));
  pm_chunk_forget(&E, PM_PTR(pm_map_del(&E.known, &root)));
  CHECK(E.bytes == before - sizeof(pm_Chunk));
  pm_chunk_forget(&E, PM_PTR(pm_map_del(&E.known, &mid)));
  CHECK(E.bytes == before - 2 * sizeof(pm_Chunk));
  unmonitor(JANK);
}

/*
** {======================================================
** Samples (sampled mode)
** =======================================================
*/

/* A monitor with the jank probe, plugins A and B, and samples charging
** groups; sampled_close undoes it. */
static void sampled_open (pm_Group **a, const pm_Set **sa, pm_Group **b,
                          const pm_Set **sb) {
  monitor(JANK);
  plugins(a, sa, b, sb);
  pm_sw_sampled(&E, 1);
}

static void sampled_close (void) {
  pm_sw_sampled(&E, 0);
  unmonitor(JANK);
}

/* One sample of the stack: its sets, the innermost first. */
static int sample (int charge, const pm_Set *inner, const pm_Set *outer) {
  if (!pm_sw_sample(&E, 0, charge))
    return 0;
  pm_sw_sample_set(&E, inner, 1);
  if (outer != NULL)
    pm_sw_sample_set(&E, outer, 0);
  return 1;
}

/* 1 ms before an event, then A alone for 3 ms (a sample, A twice on the
** stack), A calling B for
** 2 ms (a sample), 1 ms more before the event ends.  Totals take each
** sample's whole span; the event's durations only its part in the event,
** and the last sample's groups the time after it. */
static void test_samples (void) {
  pm_Group *a, *b;
  const pm_Set *sa, *sb;
  sampled_open(&a, &sa, &b, &sb);
  fake_advance(1000, 1000);
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  fake_advance(3000, 3000);
  CHECK(sample(1, sa, sa)); /* A -> A: charged once */
  fake_advance(2000, 2000);
  CHECK(sample(1, sb, sa));
  fake_advance(1000, 1000);
  CHECK(pm_sw_event_end(&E) == PM_OK);
  pm_sw_snapshot(&E);
  NEAR(cpu(a), 6000);
  NEAR(self(a), 4000);
  NEAR(cpu(b), 2000);
  NEAR(self(b), 2000);
  NEAR(E.process.cpu.cpu_us, 7000);
  CHECK(a->total.events == 1 && b->total.events == 1);
  NEAR(a->total.event_us, 6000);
  NEAR(a->total.self_event_us, 3000);
  NEAR(b->total.event_us, 3000);
  NEAR(b->total.self_event_us, 3000);
  CHECK(a->total.durations[2] == 1 && a->total.durations[3] == 0);
  CHECK(a->total.self_durations[1] == 1 && a->total.self_durations[2] == 0);
  /* an exact monitor open, or a quiet region: samples charge nothing */
  fake_advance(1000, 1000);
  CHECK(!sample(0, sa, NULL));
  pm_sw_quiet(&E, 1);
  fake_advance(1000, 1000);
  CHECK(!sample(1, sa, NULL));
  pm_sw_quiet(&E, 0);
  pm_sw_snapshot(&E);
  NEAR(cpu(a), 6000);
  sampled_close();
}

/* A span the machine held back, over two events: A sampled 4 ms into the
** first, then B 36 ms with no sample; in the second, B runs 4 ms of CPU in
** 60 ms of wall time (preempted) and is sampled.  By wall time the span's
** part in the second event is 25 ms; B's time there is the event's CPU
** time, 4 ms. */
static void test_held_back_sample (void) {
  pm_Group *a, *b;
  const pm_Set *sa, *sb;
  sampled_open(&a, &sa, &b, &sb);
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  fake_advance(4000, 4000);
  CHECK(sample(1, sa, NULL));
  fake_advance(36000, 36000);
  CHECK(pm_sw_event_end(&E) == PM_OK);
  pm_sw_snapshot(&E);
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  fake_advance(60000, 4000);
  CHECK(sample(1, sb, NULL));
  CHECK(pm_sw_event_end(&E) == PM_OK);
  pm_sw_snapshot(&E);
  CHECK(b->total.events == 1);
  NEAR(b->total.event_us, 4000);
  CHECK(b->total.durations[2] == 1 && b->total.durations[3] == 0);
  NEAR(cpu(b), 40000); /* the total takes the whole span */
  sampled_close();
}

/* A sample counts the CPU time the process counts, from where samples
** begin to charge: when the last exact monitor goes (its stopwatches
** measured until then), and when the jank probe comes (the process's CPU
** time was not read before).  A span from the sample before either would
** charge A time the process has not, or that A was charged already. */
static void test_sample_spans_restart (void) {
  pm_Group *a, *b;
  const pm_Set *sa, *sb;
  sampled_open(&a, &sa, &b, &sb);
  fake_advance(4000, 4000);
  CHECK(!sample(0, sa, NULL)); /* an exact monitor is open: it measures */
  fake_advance(3000, 3000);
  pm_sw_stop(&E); /* it closes; the sampled one stays */
  fake_advance(1000, 1000);
  CHECK(sample(1, sa, NULL));
  pm_sw_snapshot(&E);
  NEAR(cpu(a), 1000);
  pm_sw_probes(&E, JANK, -1); /* the jank probe goes, then comes back */
  fake_advance(4000, 4000);
  CHECK(!sample(1, sa, NULL));
  fake_advance(2000, 2000);
  pm_sw_probes(&E, JANK, 1);
  fake_advance(1000, 1000);
  CHECK(sample(1, sa, NULL));
  pm_sw_snapshot(&E);
  NEAR(cpu(a), 2000);
  CHECK(cpu(a) <= E.process.cpu.cpu_us);
  sampled_close();
}

/* The sample window: opened 1 ms into a 4 ms span, it takes the 3 ms of
** CPU time since; then B inside A for 6 ms; the sample 3 ms past its end
** (10 ms) ends it and gives it nothing: its figures cover it up to its
** last sample, exactly.  They are read inside the event, which the totals
** reach only at its end.  A second window, where an exact monitor
** measures: its samples' time is missed, no group's; ended early, it ends
** there.  A third, opened after 5 ms idle: the sample's CPU time is all
** its own. */
static void test_sample_window (void) {
  pm_Group *a, *b;
  const pm_Set *sa, *sb;
  sampled_open(&a, &sa, &b, &sb);
  CHECK(pm_sw_event_begin(&E) == PM_OK);
  CHECK(sample(1, sa, NULL)); /* the span starts here */
  fake_advance(1000, 1000);
  pm_sw_window(&E, 10000);
  fake_advance(3000, 3000);
  CHECK(sample(1, sa, NULL));
  fake_advance(6000, 6000);
  CHECK(sample(1, sb, sa));
  CHECK(E.sample_window.open);
  fake_advance(4000, 4000);
  CHECK(sample(1, sa, NULL));
  CHECK(!E.sample_window.open); /* past its end: over */
  fake_advance(1000, 1000);
  CHECK(sample(1, sa, NULL)); /* after it: not its */
  CHECK(a->sample_window.id == E.sample_window.id &&
        b->sample_window.id == E.sample_window.id);
  NEAR(a->sample_window.cpu_us, 9000);
  NEAR(a->sample_window.self_us, 3000);
  CHECK(a->sample_window.samples == 2 && a->sample_window.self_samples == 1);
  NEAR(b->sample_window.cpu_us, 6000);
  NEAR(b->sample_window.self_us, 6000);
  CHECK(b->sample_window.samples == 1 && b->sample_window.self_samples == 1);
  NEAR(E.sample_window.cpu_us, 9000);
  NEAR(E.sample_window.missed_us, 0);
  CHECK(E.sample_window.samples == 2);
  NEAR(E.sample_window.until - E.sample_window.since, 10000);
  NEAR(E.sample_window.last - E.sample_window.since, 9000);
  NEAR(cpu(a), 0); /* the event is open: nothing committed */
  CHECK(pm_sw_event_end(&E) == PM_OK);
  pm_sw_snapshot(&E);
  NEAR(cpu(a), 15000);
  pm_sw_window(&E, 5000);
  fake_advance(2000, 1000);
  CHECK(!sample(0, sa, NULL)); /* an exact monitor measures */
  NEAR(E.sample_window.cpu_us, 1000);
  NEAR(E.sample_window.missed_us, 1000);
  CHECK(a->sample_window.id !=
        E.sample_window.id); /* the older window's: none here */
  fake_advance(1000, 1000);
  pm_sw_window_end(&E);
  CHECK(!E.sample_window.open);
  NEAR(E.sample_window.until - E.sample_window.since, 3000);
  fake_advance(1000, 1000);
  CHECK(sample(1, sa, NULL));
  CHECK(a->sample_window.id != E.sample_window.id);
  NEAR(E.sample_window.cpu_us, 1000);
  /* opened after 5 ms idle since the last sample, then 1 ms of CPU: the
  ** window's is the CPU time since it opened, all of the span's */
  fake_advance(5000, 0);
  pm_sw_window(&E, 5000);
  fake_advance(1000, 1000);
  CHECK(sample(1, sa, NULL));
  NEAR(a->sample_window.cpu_us, 1000);
  NEAR(E.sample_window.cpu_us, 1000);
  sampled_close();
}

/* Sampled mode's memory: the allocator's side.  An allocation of size
** bytes by the code of set s (a new block, or the growth of one): where
** it covers points, the walk that follows charges s, innermost, and outer
** (or NULL) below it. */
static void allocate (size_t size, int block, const pm_Set *s,
                      const pm_Set *outer) {
  E.allocs.bytes += size;
  E.allocs.count += block;
  if (E.allocs.bytes <= E.alloc_next)
    return;
  pm_sw_alloc_cross(&E, size, block);
  if (!pm_sw_sample(&E, 1, 1))
    return;
  pm_sw_sample_set(&E, s, 1);
  if (outer != NULL)
    pm_sw_sample_set(&E, outer, 0);
}

/* A sampled monitor with the memory probe, over plugins A and B; the
** draws from seed. */
static void sampled_memory_open (pm_Group **a, const pm_Set **sa, pm_Group **b,
                                 const pm_Set **sb, uint64_t seed) {
  monitor(MEMORY);
  E.alloc_seed = seed;
  plugins(a, sa, b, sb);
  pm_sw_sampled(&E, 1);
  CHECK(E.alloc_next != UINT64_MAX && E.alloc_stride == PM_ALLOC_STRIDE);
}

static void sampled_memory_close (void) {
  pm_sw_sampled(&E, 0);
  CHECK(E.alloc_next == UINT64_MAX); /* nothing drawn any more */
  unmonitor(MEMORY);
}

/* A plugin that allocates on its own gets a point for each stride of its
** bytes, less or more one: 4 MB in 64-byte blocks and one block of ten
** strides are charged within a stride of their bytes, and the blocks
** made within a point's worth (stride / 64) of their number.  The points
** in the big block count it once on average, not ten times.  The process's
** totals are exact. */
static void test_sampled_allocs_alone (void) {
  pm_Group *a, *b;
  const pm_Set *sa, *sb;
  uint64_t stride = PM_ALLOC_STRIDE, n = 4u << 20, i;
  sampled_memory_open(&a, &sa, &b, &sb, 12345);
  for (i = 0; i < n / 64; i++)
    allocate(64, 1, sa, NULL);
  allocate(10 * stride, 1, sb, sa); /* B, called by A */
  pm_sw_snapshot(&E);
  CHECK(a->total.alloc.bytes + stride >= n + 10 * stride &&
        a->total.alloc.bytes <= n + 10 * stride + stride);
  CHECK(a->total.self_alloc.bytes + stride >= n &&
        a->total.self_alloc.bytes <= n + stride);
  CHECK(b->total.alloc.bytes + stride >= 10 * stride &&
        b->total.alloc.bytes <= 11 * stride);
  CHECK(b->total.self_alloc.bytes == b->total.alloc.bytes);
  CHECK(a->total.self_alloc.count + stride / 64 >= n / 64 &&
        a->total.self_alloc.count <= n / 64 + stride / 64);
  CHECK(b->total.alloc.count <= 2);
  CHECK(E.process.alloc.bytes == n + 10 * stride);
  CHECK(E.process.alloc.count == n / 64 + 1);
  sampled_memory_close();
}

/* A and B allocate in turn, in blocks much smaller than a stride (A 100
** bytes, B 300, then a growth of B's by 200): each point falls on one of
** them with the chance of its share, 1/6 for A.  A's 4 MB are 256 points
** on average, of 1536, so a run's figure is good to 5.7% (one standard
** deviation): every run within 25%, and the mean of 100 runs, one for
** each seed, within 2% (0.57% is one standard deviation). */
static void test_sampled_allocs_shared (void) {
  pm_Group *a, *b;
  const pm_Set *sa, *sb;
  const uint64_t rounds = 41944; /* 4 MB of A's, 20 MB of B's */
  double sum = 0, sum_count = 0, sum_b = 0;
  uint64_t seed, i;
  for (seed = 1; seed <= 100; seed++) {
    double bytes;
    sampled_memory_open(&a, &sa, &b, &sb, seed * 7919);
    for (i = 0; i < rounds; i++) {
      allocate(100, 1, sa, NULL);
      allocate(300, 1, sb, NULL);
      allocate(200, 0, sb, NULL);
    }
    pm_sw_snapshot(&E);
    bytes = (double)a->total.alloc.bytes;
    CHECK(bytes > 0.75 * 100 * rounds && bytes < 1.25 * 100 * rounds);
    CHECK(a->total.self_alloc.bytes == a->total.alloc.bytes);
    sum += bytes;
    sum_count += (double)a->total.alloc.count;
    sum_b += (double)b->total.alloc.count;
    sampled_memory_close();
  }
  CHECK(sum / 100 > 0.98 * 100 * rounds && sum / 100 < 1.02 * 100 * rounds);
  /* blocks: A's and B's each one a round (B's growths make none) */
  CHECK(sum_count / 100 > 0.98 * rounds && sum_count / 100 < 1.02 * rounds);
  CHECK(sum_b / 100 > 0.98 * rounds && sum_b / 100 < 1.02 * rounds);
}

/* Points due when an exact monitor is open, or in a quiet region (its
** allocations are no group's), charge nothing; the process counts all. */
static void test_sampled_allocs_dropped (void) {
  pm_Group *a, *b;
  const pm_Set *sa, *sb;
  sampled_memory_open(&a, &sa, &b, &sb, 99);
  E.allocs.bytes += 2 * PM_ALLOC_STRIDE;
  pm_sw_alloc_cross(&E, 2 * PM_ALLOC_STRIDE, 1);
  CHECK(!pm_sw_sample(&E, 1, 0)); /* exact wins: dropped */
  CHECK(!pm_sw_sample(&E, 1, 1)); /* and nothing is due any more */
  pm_sw_quiet(&E, 1);
  E.allocs.bytes += 2 * PM_ALLOC_STRIDE;
  pm_sw_alloc_cross(&E, 2 * PM_ALLOC_STRIDE, 1);
  CHECK(!pm_sw_sample(&E, 1, 1));
  pm_sw_quiet(&E, 0);
  pm_sw_snapshot(&E);
  CHECK(a->total.alloc.bytes == 0 && b->total.alloc.bytes == 0);
  CHECK(E.process.alloc.bytes == 4 * PM_ALLOC_STRIDE);
  sampled_memory_close();
}

static int drop_third (uintptr_t val, void *arg) {
  (void)arg;
  return (val - 1) % 3 == 0; /* val is i + 1 */
}

/* The maps' filter (pm_map_may_hold) never says a key one of them holds
** is absent: after inserts, growth, deletions past the remake, a filter
** walk, a shrink and one map's end; and it keeps most absent keys off the
** maps. */
static void test_map_filter (void) {
  static char keys[6000];
  pm_Map m, n;
  pm_MapFilter f;
  int i, ok = 1, absent_hits = 0;
  memset(&m, 0, sizeof(m));
  memset(&n, 0, sizeof(n));
  memset(&f, 0, sizeof(f));
  pm_map_share(&m, &f);
  pm_map_share(&n, &f);
  CHECK(!pm_map_may_hold(&f, &keys[0]));
  for (i = 0; i < 2000; i++)
    CHECK(pm_map_put(&m, &keys[i], (uintptr_t)i + 1, E.falloc, E.fud));
  for (i = 4000; i < 5000; i++)
    CHECK(pm_map_put(&n, &keys[i], (uintptr_t)i + 1, E.falloc, E.fud));
  for (i = 0; i < 2000; i++)
    ok &= pm_map_may_hold(&f, &keys[i]);
  for (i = 4000; i < 5000; i++)
    ok &= pm_map_may_hold(&f, &keys[i]);
  CHECK(ok);
  for (i = 2000; i < 4000; i++)
    absent_hits += pm_map_may_hold(&f, &keys[i]);
  CHECK(absent_hits < 400); /* 8 bits a slot, under half full: ~6% */
  for (i = 0; i < 2000; i += 2) /* short of the remake (map_filter_churn) */
    CHECK(pm_map_del(&m, &keys[i]) == (uintptr_t)i + 1);
  for (i = 4000; i < 5000; i += 2)
    CHECK(pm_map_del(&n, &keys[i]) == (uintptr_t)i + 1);
  for (i = 1; i < 2000; i += 2)
    ok &= pm_map_may_hold(&f, &keys[i]) &&
          pm_map_get(&m, &keys[i]) == (uintptr_t)i + 1;
  for (i = 4001; i < 5000; i += 2)
    ok &= pm_map_may_hold(&f, &keys[i]);
  CHECK(ok);
  pm_map_filter(&m, drop_third, NULL);
  for (i = 1; i < 2000; i += 2)
    ok &= (i % 3 == 0) || pm_map_may_hold(&f, &keys[i]);
  for (i = 4001; i < 5000; i += 2)
    ok &= pm_map_may_hold(&f, &keys[i]);
  CHECK(ok);
  for (i = 1; i < 2000; i += 2) /* m under 1/8 full: it and f shrink */
    pm_map_del(&m, &keys[i]);
  pm_map_shrink(&m, E.falloc, E.fud);
  for (i = 4001; i < 5000; i += 2)
    ok &= pm_map_may_hold(&f, &keys[i]);
  CHECK(ok);
  pm_map_free(&m, E.falloc, E.fud);
  for (i = 4001; i < 5000; i += 2)
    ok &= pm_map_may_hold(&f, &keys[i]);
  CHECK(ok);
  pm_map_free(&n, E.falloc, E.fud);
  CHECK(f.size == 0 && f.bits == NULL && !pm_map_may_hold(&f, &keys[4001]));
}

/* pm_map_promote: a key found past its home slot, probed twice in a row,
** takes that slot, so that pm_map_home settles its next lookup; two keys
** of one home probed in turn stay where they are; every key stays
** reachable, through deletions (the backward shift) too. */
static void test_map_promote (void) {
  static char keys[4000];
  pm_Map m;
  const char *run[4];
  uintptr_t v;
  size_t home, mask;
  int i, n = 0, ok = 1;
  memset(&m, 0, sizeof(m));
  CHECK(pm_map_put(&m, &keys[0], 1, E.falloc, E.fud)); /* sets the size */
  for (i = 1; i < 40; i++)
    CHECK(pm_map_put(&m, &keys[i], (uintptr_t)i + 1, E.falloc, E.fud));
  /* four keys of one home slot, put in order: the last three run past it
  ** (the map does not grow meanwhile, which would move them) */
  mask = m.mask;
  home = pm_map_slot(&m, &keys[100]);
  for (i = 100; i < 4000 && n < 4; i++)
    if (pm_map_slot(&m, &keys[i]) == home && pm_map_get(&m, &keys[i]) == 0) {
      CHECK(pm_map_put(&m, &keys[i], (uintptr_t)i + 1, E.falloc, E.fud));
      run[n++] = &keys[i];
    }
  CHECK(n == 4 && m.mask == mask);
  CHECK(!pm_map_home(&m, run[3], &v));
  /* the first probe finds it where it is, the second moves it home */
  CHECK(pm_map_promote(&m, run[3]) == (uintptr_t)(run[3] - keys) + 1);
  CHECK(!pm_map_home(&m, run[3], &v));
  CHECK(pm_map_promote(&m, run[3]) == (uintptr_t)(run[3] - keys) + 1);
  CHECK(pm_map_home(&m, run[3], &v) && v == (uintptr_t)(run[3] - keys) + 1);
  /* two keys probed in turn take nothing from each other */
  for (i = 0; i < 6; i++)
    pm_map_promote(&m, run[1 + i % 2]);
  CHECK(pm_map_home(&m, run[3], &v));
  /* all reachable, before and after deleting the one moved off its home */
  for (i = 0; i < 40; i++)
    ok &= pm_map_get(&m, &keys[i]) == (uintptr_t)i + 1;
  for (i = 0; i < 4; i++)
    ok &= pm_map_get(&m, run[i]) == (uintptr_t)(run[i] - keys) + 1;
  CHECK(ok);
  CHECK(pm_map_del(&m, run[0]) != 0);
  for (i = 1; i < 4; i++)
    ok &= pm_map_get(&m, run[i]) == (uintptr_t)(run[i] - keys) + 1;
  for (i = 0; i < 40; i++)
    ok &= pm_map_get(&m, &keys[i]) == (uintptr_t)i + 1;
  CHECK(ok);
  pm_map_free(&m, E.falloc, E.fud);
}

/* Whether f may hold every key that m or n holds. */
static int filter_holds (const pm_Map *m, const pm_Map *n,
                         const pm_MapFilter *f) {
  const pm_Map *maps[2];
  size_t i;
  int k;
  maps[0] = m;
  maps[1] = n;
  for (k = 0; k < 2; k++)
    for (i = 0; maps[k]->e != NULL && i <= maps[k]->mask; i++)
      if (maps[k]->e[i].key != NULL && !pm_map_may_hold(f, maps[k]->e[i].key))
        return 0;
  return 1;
}

/* A filter whose allocation fails keeps its size and every key: at a
** map's growth (the map grows or not, as its own allocation goes), at a
** shrink and at the other map's end; a first put with no filter to put
** the key in fails. */
static void test_map_filter_memory (void) {
  static char keys[3000];
  pm_Map m, n;
  pm_MapFilter f;
  size_t size;
  int i;
  memset(&m, 0, sizeof(m));
  memset(&n, 0, sizeof(n));
  memset(&f, 0, sizeof(f));
  pm_map_share(&m, &f);
  pm_map_share(&n, &f);
  fail_next = 1; /* the filter, made first */
  CHECK(!pm_map_put(&m, &keys[0], 1, E.falloc, E.fud));
  CHECK(m.e == NULL && f.size == 0 && !pm_map_may_hold(&f, &keys[0]));
  for (i = 0; i < 32; i++)
    CHECK(pm_map_put(&m, &keys[i], 1, E.falloc, E.fud));
  CHECK(f.size == 64);
  fail_next = 1; /* the filter's growth: the map grows alone */
  CHECK(pm_map_put(&m, &keys[32], 1, E.falloc, E.fud));
  CHECK(fail_next == 0 && m.mask + 1 == 128 && f.size == 64);
  CHECK(filter_holds(&m, &n, &f));
  fail_next = 1; /* the other map's first entries, the filter as it was */
  CHECK(pm_map_put(&n, &keys[2000], 1, E.falloc, E.fud));
  CHECK(fail_next == 0 && f.size == 64 && filter_holds(&m, &n, &f));
  for (i = 33; i < 64; i++)
    CHECK(pm_map_put(&m, &keys[i], 1, E.falloc, E.fud));
  fail_next = 2; /* the filter grows, the map does not: nothing put */
  CHECK(!pm_map_put(&m, &keys[64], 1, E.falloc, E.fud));
  CHECK(fail_next == 0 && m.mask + 1 == 128 && f.size == 512);
  CHECK(pm_map_get(&m, &keys[64]) == 0 && filter_holds(&m, &n, &f));
  for (i = 64; i < 1000; i++)
    CHECK(pm_map_put(&m, &keys[i], 1, E.falloc, E.fud));
  for (i = 0; i < 1000; i++) /* m under 1/8 full */
    if (i % 16 != 0)
      pm_map_del(&m, &keys[i]);
  size = f.size;
  fail_next = 2; /* the map shrinks, its filter cannot */
  pm_map_shrink(&m, E.falloc, E.fud);
  CHECK(fail_next == 0 && m.mask + 1 == 256 && f.size == size);
  CHECK(filter_holds(&m, &n, &f));
  fail_next = 1; /* n's end: the filter cannot shrink to m's */
  pm_map_free(&n, E.falloc, E.fud);
  CHECK(fail_next == 0 && f.size == size && filter_holds(&m, &n, &f));
  pm_map_free(&m, E.falloc, E.fud);
  CHECK(f.size == 0 && f.bits == NULL);
}

/* Deletions past half the filter's bytes make it again from the keys:
** deleted keys' bits go, held keys' stay. */
static void test_map_filter_churn (void) {
  static char keys[3000];
  pm_Map m, n;
  pm_MapFilter f;
  int i, round, ok = 1, absent_hits = 0;
  memset(&m, 0, sizeof(m));
  memset(&n, 0, sizeof(n));
  memset(&f, 0, sizeof(f));
  pm_map_share(&m, &f);
  pm_map_share(&n, &f);
  for (i = 0; i < 1000; i++)
    CHECK(pm_map_put(&m, &keys[i], 1, E.falloc, E.fud));
  for (i = 2000; i < 2500; i++)
    CHECK(pm_map_put(&n, &keys[i], 1, E.falloc, E.fud));
  CHECK(f.size == 4096); /* 2048 + 1024 slots */
  for (round = 0; round < 4; round++) { /* 4000 deletions: made again */
    for (i = 0; i < 1000; i++)
      CHECK(pm_map_del(&m, &keys[i]) == 1);
    ok &= filter_holds(&m, &n, &f);
    for (i = 0; i < 1000; i++)
      CHECK(pm_map_put(&m, &keys[i], 1, E.falloc, E.fud));
    ok &= filter_holds(&m, &n, &f);
  }
  CHECK(ok && f.dels < 4000);
  for (i = 0; i < 1000; i++)
    pm_map_del(&m, &keys[i]);
  for (i = 0; i < 4096; i++) /* past the remake again: m's bits go */
    CHECK(pm_map_put(&m, &keys[2999], 1, E.falloc, E.fud) &&
          pm_map_del(&m, &keys[2999]) == 1);
  CHECK(filter_holds(&m, &n, &f));
  for (i = 0; i < 1000; i++)
    absent_hits += pm_map_may_hold(&f, &keys[i]);
  CHECK(absent_hits < 100); /* n's 500 keys in 32768 bits: ~2% */
  pm_map_free(&m, E.falloc, E.fud);
  pm_map_free(&n, E.falloc, E.fud);
  CHECK(f.size == 0);
}

/* }====================================================== */

/*
** {======================================================
** Source prefixes
** =======================================================
*/

static pm_Path *chunk_path (const char *path) {
  pm_Path *p = pm_path_intern(&E, path[0], path + 1, strlen(path + 1));
  CHECK(p != NULL);
  return p;
}

/* Attaches name (as written) and path (normalised: the adapter's) to g. */
static void attach (const char *name, const char *path, pm_Group *g) {
  size_t len = strlen(path);
  CHECK(pm_source_attach(&E, name, strlen(name), &path, &len, 1, g));
}

static int detach (const char *name, pm_Group *g) {
  return pm_source_detach(&E, name, strlen(name), g);
}

/* The groups of the prefixes of a chunk of one key, p, in the order
** found. */
static int groups_of (pm_Path *p, pm_Group **g) {
  pm_Path *keys[PM_CHUNK_KEYS] = {p, NULL};
  return pm_source_groups(&E, keys, g, PM_SET_MAX);
}

/* The set of a function of that chunk. */
static pm_Set *set_for (pm_Path *p) {
  pm_Path *keys[PM_CHUNK_KEYS] = {p, NULL};
  return pm_set_for(&E, NULL, NULL, keys, "chunk");
}

typedef struct Unmatched {
  int n;
  const pm_Group *g[4];
} Unmatched;

static void note_unmatched (void *ud, const char *prefix, size_t len,
                            const pm_Group *g) {
  Unmatched *u = ud;
  (void)prefix;
  (void)len;
  if (u->n < 4)
    u->g[u->n] = g;
  u->n++;
}

/* A prefix covers a chunk's key of its own kind from its first byte on,
** as a plain string prefix; the longest prefixes' groups come first; a
** chunk name is matched by the prefix as written, never its path.
** Attaching twice is attaching once; detaching undoes it, once. */
static void test_source_keys (void) {
  pm_Group *a, *b, *g[PM_SET_MAX];
  pm_Path *p, *q, *r;
  Unmatched u;
  monitor(JANK);
  a = group("A"), b = group("B");
  p = chunk_path("@/x/plugins/a/init.lua");
  CHECK(chunk_path("@/x/plugins/a/init.lua") == p && p->refs == 2);
  pm_path_release(&E, p);
  q = chunk_path("=x/inline");
  r = chunk_path("@/x/pluginsa.lua");
  attach("x", "/x/plugins/", a);
  attach("y", "/x/plugins/a/", b);
  attach("y", "/x/plugins/a/", b);
  CHECK(a->refs == 2 && b->refs == 2);
  CHECK(groups_of(p, g) == 2 && g[0] == b && g[1] == a);
  CHECK(groups_of(q, g) == 1 && g[0] == a); /* "x" as written */
  CHECK(groups_of(r, g) == 0); /* "/x/plugins/" covers no "pluginsa" */
  memset(&u, 0, sizeof(u));
  pm_sources_unmatched(&E, note_unmatched, &u);
  CHECK(u.n == 0);
  attach("z", "/nowhere/", a);
  pm_sources_unmatched(&E, note_unmatched, &u);
  CHECK(u.n == 1 && u.g[0] == a);
  CHECK(detach("z", a) && !detach("z", a));
  CHECK(detach("y", b) && !detach("y", b) && b->refs == 1);
  CHECK(groups_of(p, g) == 1 && g[0] == a);
  CHECK(detach("x", a) && E.src.nkeys == 0 && E.src.maxlen == 0);
  CHECK(groups_of(p, g) == 0);
  pm_path_release(&E, p);
  pm_path_release(&E, q);
  pm_path_release(&E, r);
  CHECK(E.src.npaths == 0);
  unmonitor(JANK);
}

/* A symlinked file has two keys, its target's path and its own: a prefix
** of either matches, the longest first over both; a prefix's two forms
** (its target's, its own) each match. */
static void test_source_two_forms (void) {
  static const char *forms[] = {"/src/foo/", "/plugins/foo"};
  static const size_t lens[] = {9, 12};
  pm_Group *plugins, *src, *foo, *g[PM_SET_MAX];
  pm_Path *keys[PM_CHUNK_KEYS], *direct;
  Unmatched u;
  monitor(JANK);
  plugins = group("plugins"), src = group("src"), foo = group("foo");
  keys[0] = chunk_path("@/src/foo/init.lua");
  keys[1] = chunk_path("@/plugins/foo/init.lua");
  direct = chunk_path("@/plugins/foo.lua");
  attach("plugins/", "/plugins/", plugins);
  attach("src/", "/src/", src);
  CHECK(pm_source_attach(&E, "foo", 3, forms, lens, 2, foo));
  CHECK(pm_source_groups(&E, keys, g, PM_SET_MAX) == 3);
  /* "/plugins/foo" (12) and "/src/foo/" (9) are foo's, found first */
  CHECK(g[0] == foo && g[1] == plugins && g[2] == src);
  CHECK(groups_of(direct, g) == 2 && g[0] == foo && g[1] == plugins);
  memset(&u, 0, sizeof(u));
  pm_sources_unmatched(&E, note_unmatched, &u);
  CHECK(u.n == 0);
  CHECK(detach("foo", foo) && foo->refs == 1);
  CHECK(pm_source_groups(&E, keys, g, PM_SET_MAX) == 2);
  pm_path_release(&E, keys[0]);
  pm_path_release(&E, keys[1]);
  pm_path_release(&E, direct);
  unmonitor(JANK);
}

/* More prefixes than a set holds: the 32 longest prefixes' groups. */
static void test_source_most_specific (void) {
  char name[64], prefix[64];
  pm_Group *groups[40], *g[PM_SET_MAX];
  pm_Path *p;
  int k, n, ok = 1;
  monitor(JANK);
  memset(name, 'a', 40);
  strcpy(name + 40, ".lua");
  p = pm_path_intern(&E, '@', name, strlen(name));
  for (k = 0; k < 40; k++) {
    groups[k] = group("G");
    memset(prefix, 'a', (size_t)k + 1);
    prefix[k + 1] = '\0';
    attach(prefix, prefix, groups[k]);
  }
  n = groups_of(p, g);
  CHECK(n == PM_SET_MAX);
  for (k = 0; k < n; k++)
    ok &= g[k] == groups[39 - k];
  CHECK(ok);
  CHECK(set_for(p)->n == PM_SET_MAX);
  pm_path_release(&E, p);
  unmonitor(JANK);
}

/* Attaching or detaching a prefix forgets the cached resolutions of the
** sets its chunks were resolved to, and no others; a prefix that covers
** no chunk forgets nothing.  Out of memory, attaching leaves nothing. */
static void test_source_forgets (void) {
  static char f1, f2, f3; /* functions' addresses */
  static const char *paths[] = {"/new/", "/named/"};
  static const size_t lens[] = {5, 7};
  pm_Group *a = NULL, *b;
  pm_Path *p, *q;
  pm_Set *sp, *sq;
  int k;
  monitor(JANK);
  a = group("A"), b = group("B");
  p = chunk_path("@/x/a.lua");
  q = chunk_path("@/y/b.lua");
  attach("x", "/x/", a);
  attach("y", "/y/", b);
  sp = set_for(p);
  sq = set_for(q);
  CHECK(sp->n == 1 && sp->g[0] == a && sq->n == 1 && sq->g[0] == b);
  CHECK(pm_map_put(&E.fns, &f1, (uintptr_t)sp | PM_FN_LUA, E.falloc, E.fud));
  CHECK(pm_map_put(&E.fns, &f2, (uintptr_t)sq | PM_FN_LUA, E.falloc, E.fud));
  CHECK(pm_map_put(&E.fns, &f3, PM_FN_C, E.falloc, E.fud));
  attach("elsewhere", "/z/", b); /* covers no chunk */
  CHECK(E.fns.count == 3);
  attach("x2", "/x/a", b); /* covers p */
  CHECK(E.fns.count == 2 && pm_map_get(&E.fns, &f1) == 0);
  CHECK(pm_map_get(&E.fns, &f2) != 0 && pm_map_get(&E.fns, &f3) != 0);
  sp = set_for(p);
  CHECK(sp->n == 2);
  CHECK(pm_map_put(&E.fns, &f1, (uintptr_t)sp | PM_FN_LUA, E.falloc, E.fud));
  CHECK(detach("y", b) && E.fns.count == 2 && pm_map_get(&E.fns, &f2) == 0);
  /* q's functions resolve to no group now: cached as their caller's, as
     C functions are, and forgotten with them when a prefix covers q */
  CHECK(set_for(q)->n == 0);
  CHECK(pm_map_put(&E.fns, &f2, PM_FN_C, E.falloc, E.fud));
  attach("y2", "/y/", b);
  CHECK(pm_map_get(&E.fns, &f2) == 0 && pm_map_get(&E.fns, &f3) == 0);
  CHECK(pm_map_get(&E.fns, &f1) != 0);
  for (k = 1; k <= 3; k++) {
    fail_next = k;
    CHECK(!pm_source_attach(&E, "new", 3, paths, lens, 2, a));
    CHECK(fail_next == 0 && a->refs == 2);
  }
  pm_path_release(&E, p);
  pm_path_release(&E, q);
  unmonitor(JANK); /* nothing counted is lost */
}

/* 20,000 prefixes, each its group's: each chunk finds its own alone, and
** detaching them all leaves no key. */
static void test_source_many (void) {
  static pm_Group *groups[20000];
  char key[64];
  pm_Group *g[PM_SET_MAX];
  int i, ok = 1;
  monitor(JANK);
  for (i = 0; i < 20000; i++) {
    snprintf(key, sizeof(key), "/many/p%d/", i);
    groups[i] = group("P");
    attach(key, key, groups[i]);
  }
  for (i = 0; i < 20000; i += 7) {
    pm_Path *p;
    snprintf(key, sizeof(key), "@/many/p%d/init.lua", i);
    p = chunk_path(key);
    ok &= groups_of(p, g) == 1 && g[0] == groups[i];
    pm_path_release(&E, p);
  }
  CHECK(ok);
  for (i = 0; i < 20000; i++) {
    snprintf(key, sizeof(key), "/many/p%d/", i);
    ok &= detach(key, groups[i]);
  }
  CHECK(ok && E.src.nkeys == 0 && E.src.first == NULL);
  unmonitor(JANK);
}

/* }====================================================== */

int main (void) {
  static const Test tests[] = {
      {"inclusive_and_self", test_inclusive_and_self},
      {"recursion", test_recursion},
      {"library", test_library},
      {"window_shares", test_window_shares},
      {"preempted_clock_read", test_preempted_clock_read},
      {"open_window", test_open_window},
      {"idle_before_event", test_idle_before_event},
      {"nested_loop", test_nested_loop},
      {"blocking", test_blocking},
      {"cpu_migration", test_cpu_migration},
      {"switch", test_switch},
      {"memory", test_memory},
      {"jank_alert", test_jank_alert},
      {"alert_on_self", test_alert_on_self},
      {"invisible_and_unwatched", test_invisible_and_unwatched},
      {"lifetimes", test_lifetimes},
      {"upvalue_links", test_upvalue_links},
      {"chunk_trees", test_chunk_trees},
      {"sets_out_of_memory", test_sets_out_of_memory},
      {"source_keys", test_source_keys},
      {"source_two_forms", test_source_two_forms},
      {"source_most_specific", test_source_most_specific},
      {"source_forgets", test_source_forgets},
      {"source_many", test_source_many},
      {"samples", test_samples},
      {"held_back_sample", test_held_back_sample},
      {"sample_spans_restart", test_sample_spans_restart},
      {"sample_window", test_sample_window},
      {"sampled_allocs_alone", test_sampled_allocs_alone},
      {"sampled_allocs_shared", test_sampled_allocs_shared},
      {"sampled_allocs_dropped", test_sampled_allocs_dropped},
      {"map_filter", test_map_filter},
      {"map_promote", test_map_promote},
      {"map_filter_memory", test_map_filter_memory},
      {"map_filter_churn", test_map_filter_churn},
  };
  return run_tests(tests, sizeof(tests) / sizeof(tests[0]));
}
