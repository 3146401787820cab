/*
** fleet.c -- the board of published snapshots (see fleet.h).
*/
#include "fleet.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct Entry {
  uint64_t id;
  char *label, *json;
  size_t len;
  int closed;
} Entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Entry *entries;
static size_t nentries, capacity;
static uint64_t last_id;

static char *copy (const char *s, size_t len) {
  char *c = malloc(len + 1);
  if (c != NULL) {
    memcpy(c, s, len);
    c[len] = '\0';
  }
  return c;
}

/* The entry of id, under the lock; NULL if there is none. */
static Entry *find (uint64_t id) {
  size_t i;
  for (i = 0; i < nentries; i++)
    if (entries[i].id == id)
      return &entries[i];
  return NULL;
}

/* A new entry, under the lock; NULL when memory ran out. */
static Entry *add (void) {
  Entry *e;
  if (nentries == capacity) {
    size_t n = capacity ? 2 * capacity : 8;
    Entry *a = realloc(entries, n * sizeof(*a));
    if (a == NULL)
      return NULL;
    entries = a;
    capacity = n;
  }
  e = &entries[nentries++];
  memset(e, 0, sizeof(*e));
  e->id = ++last_id;
  return e;
}

int pm_fleet_put (uint64_t *id, const char *label, const char *json,
                  size_t len) {
  /* the copies are made before the lock: it is held for pointer moves */
  char *j = copy(json, len), *l = copy(label, strlen(label));
  Entry *e;
  int ok;
  pthread_mutex_lock(&lock);
  e = *id != 0 ? find(*id) : add();
  ok = e != NULL && j != NULL && l != NULL;
  if (ok) {
    free(e->json);
    free(e->label);
    e->json = j;
    e->label = l;
    e->len = len;
    *id = e->id;
    j = l = NULL;
  }
  pthread_mutex_unlock(&lock);
  free(j);
  free(l);
  return ok;
}

void pm_fleet_close (uint64_t id) {
  Entry *e;
  pthread_mutex_lock(&lock);
  if ((e = find(id)) != NULL)
    e->closed = 1;
  pthread_mutex_unlock(&lock);
}

int pm_fleet_each (pm_FleetVisit fn, void *arg) {
  Entry *snap;
  size_t n, i, made = 0;
  int ok = 1;
  pthread_mutex_lock(&lock);
  n = nentries;
  snap = calloc(n ? n : 1, sizeof(*snap));
  for (i = 0; snap != NULL && i < n; i++) {
    if (entries[i].json == NULL)
      continue; /* made, never filled: memory ran out */
    snap[made] = entries[i];
    snap[made].json = copy(entries[i].json, entries[i].len);
    snap[made].label = copy(entries[i].label, strlen(entries[i].label));
    made++;
    if (snap[made - 1].json == NULL || snap[made - 1].label == NULL)
      ok = 0;
  }
  pthread_mutex_unlock(&lock);
  if (snap == NULL)
    return 0;
  for (i = 0; i < made; i++) {
    if (ok && !fn(arg, snap[i].id, snap[i].label, snap[i].json, snap[i].len,
                  snap[i].closed))
      ok = 0;
    free(snap[i].json);
    free(snap[i].label);
  }
  free(snap);
  return ok;
}
