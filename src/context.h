/*
** context.h -- contexts: what is being charged between two changes of group.
**
** A context is the pair the stopwatch charges at any instant: the groups
** running (on the stack, in the current iteration: inclusive time) and the
** innermost frame's set (self time).  A change of group is then one clock
** read and one add to the context that ends (stopwatch.c); the cycles reach
** the groups when the contexts are flushed, at the end of a window or a
** period, once per context rather than once per change.
**
** Contexts are interned by how they are entered: a call into set s from
** a context whose running groups are those of base b is the context
** (b, s).  When s brings groups that are not running yet, the new context
** is a base itself: it lists those groups (`add`, the stopwatches that
** start, which count ticks), and the running groups are its list and
** those of the base it came from (`up`), each group once.  When s brings
** none, it shares b's running groups and differs in self time only.  So a
** recursion through two plugins makes two contexts, not one a level.
**
** Self time follows the code that caused it.  A context's self set is
** the set entered, but for a library's set (pm_Set.lib: every group a
** library's, or none, the set of code belonging to no group): a library
** called from other code works on that code's behalf, so the context
** charges its caller's self set, where that has a group that is not a
** library; a library with no such code below (the host dispatching) is
** its own self.  Contexts are then interned by (b, s, self), the last
** being s but for a library's set.
**
** Each set remembers the last context it was entered into from one base:
** calls from the host into a plugin find it there.  Each base remembers
** the last context a call from it went to past that cache: a library that
** plugins share, called from each.  Others go through the index of
** contexts by (base, set).  Contexts live until the last monitor
** closes, or until a group of theirs is swept.
**
** Their number grows with the orders in which groups call one another:
** plugins that call every other through a shared bus make one for each
** pair.  An iteration's end, when no frame can go back to any of them,
** frees them all once there are more than PM_CTX_KEEP; past PM_CTX_MAX
** none is made, and a call that would need a new one stays in its
** caller's context (its time goes to its caller's groups).
*/
#ifndef PM_CONTEXT_H
#define PM_CONTEXT_H

#include "group.h"

#define PM_CTX_KEEP 16384
#define PM_CTX_MAX 65536

struct pm_Ctx {
  /* what a change of group writes (stopwatch.c), first */
  uint64_t cycles; /* busy cycles since the last flush */
  uint64_t entries; /* calls that entered it since then (base: ticks) */
  uint64_t flush; /* the flush it is listed for (E->flushes) */
  pm_Ctx *next_charged;
  pm_Ctx *base; /* the context whose running groups are its: it, or b */
  const pm_Set *self; /* whose groups it charges self time; root: NULL */
  /* rarer: the memory probe and blocking calls */
  pm_Allocs alloc;
  double blocking; /* µs of blocking calls that ended in it */
  /* what it is */
  const pm_Set *set; /* the innermost set; NULL for the root */
  pm_Ctx *from; /* b, the base of the context it was entered from */
  pm_Ctx *up; /* a base's: the base whose groups run below its own */
  /* a base's: the context its last call out of the set cache went to */
  const pm_Set *last_set;
  pm_Ctx *last;
  uint32_t hash;
  int dying; /* names a group a sweep frees */
  int nadd;
  pm_Group *add[1]; /* nadd of them: groups of set not running in from */
};

/* The context a call into s leads to from c, charging self time to self:
** c's base's cache, or the index, or a new context.  NULL when memory ran
** out. */
pm_Ctx *pm_ctx_find (pm_Engine *E, pm_Ctx *c, const pm_Set *s,
                     const pm_Set *self);
/* A call into a library's set s from c: the context charging the self set
** the call works for (the header's rule).  Not cached on s, whose self
** set depends on its caller's. */
pm_Ctx *pm_ctx_library (pm_Engine *E, pm_Ctx *c, const pm_Set *s);

static PM_INLINE pm_Ctx *pm_ctx_child (pm_Engine *E, pm_Ctx *c,
                                       const pm_Set *s) {
  if (PM_UNLIKELY(s->lib))
    return pm_ctx_library(E, c, s);
  return s->ctx_from == c->base ? s->ctx : pm_ctx_find(E, c, s, s);
}

/* Lets the groups' room reach the contexts (E->ctx_sweep, E->ctx_free),
** which name its sets, without calling up: after pm_engine_init. */
void pm_ctx_init (pm_Engine *E);
/* Clears the groups' `dying` for every group of c's: those it charges. */
void pm_ctx_spare (pm_Ctx *c);
/* During a sweep (pm_groups_sweep, through E->ctx_sweep): spares the
** groups of the contexts charged and the one running, then frees the
** contexts that name a dying group, and every set's cache. */
void pm_ctx_sweep (pm_Engine *E);
/* Frees every context but the root, which runs from then on, with
** nothing charged (the sets go: pm_sets_free, through E->ctx_free). */
void pm_ctx_free (pm_Engine *E);

#endif
