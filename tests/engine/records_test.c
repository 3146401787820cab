/*
** records_test.c -- the profiler's records (src/profiler/records.h) alone:
** no Lua, an allocator that can be told to fail.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mem.h"
#include "records.h"

static pm_Engine E;
static pm_Records R;

static void open_records (void) {
  memset(&E, 0, sizeof(E));
  pm_engine_init(&E, test_alloc, NULL);
  memset(&R, 0, sizeof(R));
  R.E = &E;
}

/* Every byte comes back. */
static void close_records (void) {
  pm_records_free(&R);
  CHECK(R.nfuncs == 0 && R.nnodes == 0 && R.count == 0);
  CHECK(E.bytes == 0);
}

/* A sample of weight 1 at node top, numbered n. */
static void sample (uint32_t top, double n) {
  pm_Sample s;
  s.time_us = n;
  s.weight = 1;
  s.node = top - 1;
  s.thread = 1;
  pm_records_sample(&R, top, &s);
}

/* A function is kept once for its source, line, name, kind and group; its
** group's name is a copy. */
static void test_functions (void) {
  pm_Group g;
  char name[] = "plugin";
  int64_t a, b, c, d;
  open_records();
  memset(&g, 0, sizeof(g));
  g.id = 7;
  g.name = name;
  a = pm_records_func(&R, "a.lua", "f", 10, 'L', &g);
  b = pm_records_func(&R, "a.lua", "f", 10, 'L', &g);
  c = pm_records_func(&R, "a.lua", "f", 10, 'L', NULL);
  d = pm_records_func(&R, "a.lua", NULL, -1, 'C', NULL);
  CHECK(a == 0 && b == 0 && c == 1 && d == 2 && R.nfuncs == 3);
  name[0] = 'X'; /* the group is renamed, or gone */
  CHECK(strcmp(R.funcs[0].group, "plugin") == 0 && R.funcs[0].group_id == 7);
  CHECK(R.funcs[1].group == NULL && R.funcs[1].group_id == 0);
  CHECK(strcmp(R.funcs[2].name, "") == 0 && R.funcs[2].line == -1);
  close_records();
}

/* A long name is cut before a character that would not fit whole, and a
** long source at PM_PROF_SRC - 1 bytes; a name so cut finds its record. */
static void test_cuts (void) {
  char name[PM_PROF_NAME + 8], src[PM_PROF_SRC + 20];
  int64_t a;
  size_t n;
  open_records();
  memset(name, 'x', sizeof(name));
  memcpy(name + PM_PROF_NAME - 3, "\xe2\x82\xac", 3); /* a 3-byte euro */
  name[sizeof(name) - 1] = '\0';
  memset(src, 's', sizeof(src));
  src[sizeof(src) - 1] = '\0';
  a = pm_records_func(&R, src, name, 1, 'L', NULL);
  n = strlen(R.funcs[a].name);
  CHECK(n == PM_PROF_NAME - 3); /* the euro's first byte fits, not it all */
  CHECK(strlen(R.funcs[a].src) == PM_PROF_SRC - 1);
  CHECK(pm_records_func(&R, src, R.funcs[a].name, 1, 'L', NULL) == a);
  close_records();
}

/* Stacks are a trie: a node is kept once per (parent, function, line); a
** sample counts self on its top and total up to the root. */
static void test_stacks (void) {
  int64_t root, mid, top, other;
  open_records();
  root = pm_records_node(&R, 0, 0, 5);
  mid = pm_records_node(&R, (uint32_t)root + 1, 1, 7);
  top = pm_records_node(&R, (uint32_t)mid + 1, 2, 9);
  other = pm_records_node(&R, (uint32_t)mid + 1, 2, 10);
  CHECK(pm_records_node(&R, (uint32_t)root + 1, 1, 7) == mid);
  CHECK(R.nnodes == 4 && other == 3);
  sample((uint32_t)top + 1, 1);
  sample((uint32_t)top + 1, 2);
  sample((uint32_t)mid + 1, 3);
  CHECK(R.nodes[top].self == 2 && R.nodes[top].total == 2);
  CHECK(R.nodes[mid].self == 1 && R.nodes[mid].total == 3);
  CHECK(R.nodes[root].self == 0 && R.nodes[root].total == 3);
  CHECK(R.nodes[other].total == 0);
  close_records();
}

/* Thousands of records: the index grows, and every one is found again. */
static void test_many (void) {
  char src[32];
  int i, ok = 1;
  open_records();
  for (i = 0; i < 20000; i++) {
    snprintf(src, sizeof(src), "f%d.lua", i);
    ok &= pm_records_func(&R, src, "f", i, 'L', NULL) == i;
  }
  for (i = 0; i < 20000; i++) {
    snprintf(src, sizeof(src), "f%d.lua", i);
    ok &= pm_records_func(&R, src, "f", i, 'L', NULL) == i;
  }
  CHECK(ok && R.nfuncs == 20000);
  close_records();
}

/* A ring of at most 3 keeps the last 3, the oldest first, and counts the
** rest as dropped; a new limit empties it. */
static void test_ring_limit (void) {
  int64_t top;
  int k;
  open_records();
  pm_records_limit(&R, 3);
  top = pm_records_node(&R, 0, 0, 1);
  for (k = 1; k <= 5; k++)
    sample((uint32_t)top + 1, k);
  CHECK(R.count == 3 && R.cap == 3 && R.dropped == 2);
  for (k = 0; k < 3; k++)
    CHECK(pm_records_at(&R, k)->time_us == k + 3);
  CHECK(R.nodes[top].self == 5); /* counted, though not all kept */
  pm_records_limit(&R, 0);
  CHECK(R.count == 0 && R.limit == 0);
  close_records();
}

/* The ring could not grow once (memory ran out), so the oldest went and
** the ring wrapped; when it grows later its samples stay in order. */
static void test_ring_grows_after_wrap (void) {
  int64_t top;
  int k, ordered = 1;
  open_records();
  top = pm_records_node(&R, 0, 0, 1);
  for (k = 0; R.count < R.cap || R.cap == 0; k++)
    sample((uint32_t)top + 1, k);
  fail_next = 1;
  sample((uint32_t)top + 1, k++); /* no room made: the oldest goes */
  CHECK(R.dropped == 1 && R.first == 1);
  sample((uint32_t)top + 1, k++); /* room made */
  CHECK(R.cap > R.count);
  for (k = 1; k < R.count; k++)
    ordered &=
        pm_records_at(&R, k)->time_us == pm_records_at(&R, k - 1)->time_us + 1;
  CHECK(ordered && pm_records_at(&R, 0)->time_us == 1);
  close_records();
}

/* Memory running out (for the copy of a group's name) loses that record,
** never the others, and a later try makes it. */
static void test_out_of_memory (void) {
  pm_Group g;
  char name[] = "plugin";
  int64_t a;
  open_records();
  memset(&g, 0, sizeof(g));
  g.id = 1;
  g.name = name;
  a = pm_records_func(&R, "a.lua", "f", 1, 'L', NULL);
  fail_next = 1;
  CHECK(pm_records_func(&R, "b.lua", "f", 1, 'L', &g) == -1);
  CHECK(R.nfuncs == 1);
  CHECK(pm_records_func(&R, "a.lua", "f", 1, 'L', NULL) == a);
  CHECK(pm_records_func(&R, "b.lua", "f", 1, 'L', &g) == 1);
  close_records();
}

/* The array of functions cannot grow: the new one is lost, the others
** stay where they were. */
static void test_growth_fails (void) {
  char src[32];
  int i, ok = 1;
  open_records();
  for (i = 0; R.nfuncs < R.capfuncs || R.capfuncs == 0; i++) {
    snprintf(src, sizeof(src), "f%d.lua", i);
    pm_records_func(&R, src, "f", 1, 'L', NULL);
  }
  fail_next = 1;
  CHECK(pm_records_func(&R, "new.lua", "f", 1, 'L', NULL) == -1);
  for (i = 0; i < R.nfuncs; i++) {
    snprintf(src, sizeof(src), "f%d.lua", i);
    ok &= pm_records_func(&R, src, "f", 1, 'L', NULL) == i;
  }
  CHECK(ok && R.nfuncs == R.capfuncs);
  close_records();
}

int main (void) {
  static const Test tests[] = {
      {"functions", test_functions},
      {"cuts", test_cuts},
      {"stacks", test_stacks},
      {"many", test_many},
      {"ring_limit", test_ring_limit},
      {"ring_grows_after_wrap", test_ring_grows_after_wrap},
      {"out_of_memory", test_out_of_memory},
      {"growth_fails", test_growth_fails},
  };
  return run_tests(tests, sizeof(tests) / sizeof(tests[0]));
}
