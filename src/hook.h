/*
** hook.h -- the debug hook, and the shadow stacks it keeps.
**
** Lua tells perfmon about every call, tail call and return, in every
** coroutine that has the hook.  For each thread perfmon keeps a shadow
** stack: one pm_Frame per frame it saw called, with the set of groups the
** function belongs to and, when that set is not its caller's, the context
** (context.h) to go back to at its return.  A call whose set equals its
** caller's costs a push and a compare; only a change of set touches the
** stopwatch.
**
** Lua sends no return events for frames unwound by an error, so the shadow
** stack is resynchronised against ar->i_ci (each frame's CallInfo, used as
** an identity only) whenever the two disagree.  A coroutine runs on its
** resumer's context: its groups and the resumer's run while it does.
** When it yields (or finishes, or dies) the next event, from another
** thread, goes back to the context it was resumed from; when it runs
** again its frames' contexts are made again over the new resumer's.
*/
#ifndef PM_HOOK_H
#define PM_HOOK_H

#include "state.h"

typedef struct pm_Frame {
  const void *ci; /* the frame's CallInfo: identity only */
  const pm_Set *set; /* the groups its function belongs to */
  /* where its set differs from its caller's, the context its call left,
  ** to go back to at its return, in iteration iter; else NULL */
  pm_Ctx *left;
  uint64_t iter;
} pm_Frame;

struct pm_Thread {
  pm_State *S;
  lua_State *L;
  pm_Frame *f;
  int n, cap;
  int current; /* S->current is this: read beside n by every event */
  int active; /* it runs, or waits in a resume: its groups run */
  /* the context it was resumed from (its frames run over it), and the one
  ** it resumed another from (it runs again there), each with its
  ** iteration (pm_sw_valid) */
  pm_Ctx *base, *ctx;
  uint64_t base_iter, ctx_iter;
  int seeded; /* the frames on its stack when first seen are pushed */
  int blocking; /* blocking calls begun in it and not ended */
  int loops; /* nested loops entered in it and not left */
  uint64_t loop_events; /* while suspended: pm_sw_nested_pause's bits */
  lua_Hook chain; /* a program's hook that perfmon's calls, or NULL */
  int chain_mask, chain_count; /* the events it asked for */
};

/* The first exact monitor (monitor.h) installs the hook: a program's hook
** found on L or the main thread is adopted first, to be called from
** perfmon's (pm_hook_adopt returns 0 when memory ran out), then every
** thread gets perfmon's (pm_hook_install returns whether coroutines now
** resolve differently: what functions resolved to must go).  The last
** takes it away from every thread (L may be NULL), giving back the
** programs' hooks, and forgets every function's set. */
int pm_hook_adopt (lua_State *L, pm_State *S);
int pm_hook_install (lua_State *L, pm_State *S);
void pm_hook_uninstall (lua_State *L, pm_State *S);

/* Stops stopwatches of frames that are gone: frames unwound by an error
** caught in C, a coroutine that yielded.  Called at event boundaries. */
void pm_hook_settle (lua_State *L, pm_State *S);

/* After an event's boundary (the iteration moved on, every stopwatch
** under way cancelled): the settled thread that marked it goes on in its
** top frame's set, whose calls into the same set would start no
** stopwatch, so that a dispatcher's own code and the code of no group it
** runs are charged.  Not for the empty set, nor inside a blocking call,
** whose wait would be charged as CPU time, nor inside a nested loop the
** thread spun, whose work is not the spinning code's. */
void pm_hook_restart (pm_State *S);

/* L's top frame, a bracket's (perfmon.event), runs code of no group from
** here (L is settled first): the function it calls for the new iteration
** starts its groups' stopwatches even where they are its caller's, and no
** restart (pm_hook_restart) charges the caller's groups meanwhile.  S may
** be NULL. */
void pm_hook_boundary (lua_State *L, pm_State *S);

/* Whether perfmon's hook was taken from a thread it monitors since the
** first monitor opened (a debugger's debug.sethook): checks the main
** thread, L and every thread perfmon knows. */
int pm_hook_lost (lua_State *L, pm_State *S);

/* pm_sw_blocking_begin and _end, pm_sw_nested_enter and _leave for the
** thread that runs, which keeps its own count of them (settled first:
** pm_hook_settle), so that a coroutine suspended inside one takes it
** along. */
int pm_hook_blocking_begin (pm_State *S);
int pm_hook_blocking_end (pm_State *S);
int pm_hook_nested_enter (pm_State *S);
int pm_hook_nested_leave (pm_State *S);

/* Whether co's hook is perfmon's own (a monitor's or the profiler's), or
** another (a debugger's, a coverage tool's). */
int pm_hook_owns (pm_State *S, lua_State *co);
int pm_hook_foreign (pm_State *S, lua_State *co);

/* Gives co the monitor's hook as it is resumed, keeping a program's hook
** found there (a coroutine made before monitoring began has none of
** perfmon's; those made later inherit it from their creator). */
void pm_hook_give (pm_State *S, lua_State *co);

/* A program's hook h on co (debug.sethook, a debugger's, a coverage
** tool's), while monitors are open: perfmon keeps its own hook on co and
** calls h for the events of mask, with count as lua_sethook's (h NULL:
** the program's hook goes).  Returns 0 when memory ran out.  When the last
** monitor closes, h is set on co as the program set it. */
int pm_hook_chain (pm_State *S, lua_State *co, lua_Hook h, int mask, int count);
/* The program's hook chained on co, or NULL; its mask and count. */
lua_Hook pm_hook_chained (pm_State *S, lua_State *co, int *mask, int *count);

void pm_thread_forget (pm_Thread *t); /* its memory is freed */
/* Clears `dying` on every group a shadow stack holds: pm_groups_sweep's
** spare. */
void pm_hook_spare (void *S); /* a pm_State */
/* Frees the dead groups (pm_groups_sweep, sparing the shadow stacks'), as
** perfmon's own work: charged to nobody.  Run where perfmon's own work
** runs (a snapshot, a group made, an event's end, a poll), never from the
** hook or the allocator wrapper.  With due, only once the dead are 256 or
** more and outnumber the living: a host whose groups come and go by the
** thousand (groups made and dropped, a chunk compiled per event under
** "chunks", or by a host that only polls) keeps its memory flat; a sweep
** walks every group, half of them dead or more.  Otherwise it compares
** two counts, cheap enough for every poll. */
void pm_hook_sweep (pm_State *S, int due);


/* Asks for a count event at L's next instruction, for a sample: the
** profiler's signal handler does (async-signal-safe, as lua_sethook is).
** With `ret`, the return of the function running answers first, if it
** comes first (the allocator asks so: the sample is that function's).
** Returns whether it set the hook, which walks L's whole stack where the
** direct way (trap.h) failed its check; a foreign hook gets no request.
** The event is answered by S->answer.  pm_hook_unrequest takes the
** request back, keeping the monitor's hook and a program's chained. */
int pm_hook_request (pm_State *S, lua_State *L, int ret);
void pm_hook_unrequest (pm_State *S, lua_State *L);


/* The deepest shadow stack's capacity, in frames. */
int pm_hook_capacity (pm_State *S);

/* Picks the fast hook when frame.h's accessors pass their check and
** PERFMON_PATH is not "public"; names the one in use. */
void pm_hook_choose (lua_State *L, pm_State *S);
const char *pm_hook_path (pm_State *S);

#endif
