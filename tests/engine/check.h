/*
** check.h -- the checks, the allocator and the runner of the C tests here:
** each test a function, each failed check a line on stderr naming it.
*/
#ifndef CHECK_H
#define CHECK_H

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

static int failures;
static const char *current; /* the test running */

#define CHECK(c)                                                               \
  ((c) ? (void)0                                                               \
       : (void)(failures++, fprintf(stderr, "%s:%d: %s: failed: %s\n",         \
                                    __FILE__, __LINE__, current, #c)))
/* Exact but for the rounding of a share (a ratio of cycles). */
#define NEAR(a, b)                                                             \
  ((fabs((double)(a) - (double)(b)) < 1e-6)                                    \
       ? (void)0                                                               \
       : (void)(failures++,                                                    \
                fprintf(stderr, "%s:%d: %s: %s is %.9g, not %.9g\n", __FILE__, \
                        __LINE__, current, #a, (double)(a), (double)(b))))

/* The tests' allocator, with lua_Alloc's contract; fail_next = k > 0: the
** k-th allocation from now fails (1: the next). */
static int fail_next;

static void *test_alloc (void *ud, void *p, size_t osize, size_t nsize) {
  (void)ud;
  (void)osize;
  if (nsize == 0) {
    free(p);
    return NULL;
  }
  if (fail_next > 0 && --fail_next == 0)
    return NULL;
  return realloc(p, nsize);
}

typedef struct Test {
  const char *name;
  void (*f)(void);
} Test;

/* Runs the n tests; the exit status: 0 when every check passed. */
static int run_tests (const Test *tests, size_t n) {
  size_t i;
  for (i = 0; i < n; i++) {
    int before = failures;
    current = tests[i].name;
    tests[i].f();
    printf("%s %s\n", failures == before ? "ok  " : "FAIL", current);
  }
  printf("%d failure%s\n", failures, failures == 1 ? "" : "s");
  return failures != 0;
}

#endif
