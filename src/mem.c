/*
** mem.c -- perfmon's own memory (see mem.h).
*/
#include "mem.h"

#include <string.h>

void *pm_alloc (pm_Engine *E, size_t n) {
  void *p = E->falloc(E->fud, NULL, 0, n);
  if (p != NULL)
    E->bytes += n;
  return p;
}

void pm_free (pm_Engine *E, void *p, size_t n) {
  E->falloc(E->fud, p, n, 0);
  E->bytes -= n;
}

void *pm_grow (pm_Engine *E, void *a, int n, int need, int *cap, size_t size,
               int first) {
  int c = *cap;
  void *b;
  if (need <= c)
    return a;
  while (c < need)
    c = c > 0 ? 2 * c : first;
  if ((b = pm_alloc(E, (size_t)c * size)) == NULL)
    return NULL;
  if (a != NULL) {
    memcpy(b, a, (size_t)n * size);
    pm_free(E, a, (size_t)*cap * size);
  }
  *cap = c;
  return b;
}

char *pm_strdup (pm_Engine *E, const char *s) {
  size_t n = strlen(s) + 1;
  char *d = pm_alloc(E, n);
  if (d != NULL)
    memcpy(d, s, n);
  return d;
}

void pm_strfree (pm_Engine *E, char *s) {
  if (s != NULL)
    pm_free(E, s, strlen(s) + 1);
}
