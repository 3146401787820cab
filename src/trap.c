/*
** trap.c -- the direct hook setting of trap.h, and its start-up check.
*/
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* process_vm_readv, syscall */
#endif

#include "trap.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#endif

#include <lauxlib.h>
#include <lualib.h>

#include "frame.h"

/*
** {======================================================
** Lua 5.4's private layout (lstate.h, 5.4.3 to 5.4.6)
** =======================================================
*/

#define CIST_C (1 << 1) /* the frame runs a C function */

typedef struct TrapCI TrapCI;
struct TrapCI { /* CallInfo */
  void *func, *top;
  TrapCI *previous, *next;
  union {
    struct {
      const void *savedpc;
      volatile sig_atomic_t trap; /* look at the hook before the next op */
      int nextraargs;
    } l;
    struct {
      void *k;
      ptrdiff_t old_errfunc;
      intptr_t ctx;
    } c;
  } u;
  int u2;
  short nresults;
  unsigned short callstatus;
};

typedef struct TrapState { /* lua_State, up to its hook fields */
  void *next;
  unsigned char tt, marked, status, allowhook;
  unsigned short nci;
  void *top, *l_G;
  TrapCI *ci; /* the running frame */
  void *stack_last, *stack, *openupval, *tbclist, *gclist, *twups;
  void *errorJmp;
  TrapCI base_ci;
  volatile lua_Hook hook;
  ptrdiff_t errfunc;
  uint32_t nCcalls;
  int oldpc, basehookcount, hookcount;
  volatile sig_atomic_t hookmask;
} TrapState;

typedef struct TrapValue { /* TValue, and StackValue as a stack holds it */
  void *p;
  unsigned char tt;
} TrapValue;

typedef struct TrapCClosure { /* CClosure */
  void *next;
  unsigned char tt, marked, nupvalues;
  void *gclist;
  lua_CFunction f;
  TrapValue upvalue[1];
} TrapCClosure;

#define TRAP_VTHREAD 8 /* LUA_VTHREAD, in an object's header */
#define TRAP_TTHREAD (TRAP_VTHREAD | (1 << 6)) /* in a TValue: collectable */
#define TRAP_TLCF (LUA_TFUNCTION | (1 << 4)) /* a light C function */
#define TRAP_VCCL (LUA_TFUNCTION | (2 << 4)) /* a C closure's header */
#define TRAP_TCCL (TRAP_VCCL | (1 << 6)) /* a C closure, in a TValue */

/* }====================================================== */

/* The order of lua_sethook's writes, with the mark on the top Lua frame
** (below any C frames running over it) instead of on every Lua frame;
** call and return events need no mark at all (ldo.c looks at the mask). */
void pm_trap_sethook (lua_State *L, lua_Hook h, int mask, int count,
                      int direct) {
  TrapState *s = (TrapState *)L;
  TrapCI *ci;
  if (!direct) {
    lua_sethook(L, h, mask, count);
    return;
  }
  if (h == NULL || mask == 0) {
    h = NULL;
    mask = 0;
  }
  s->hook = h;
  s->basehookcount = count;
  s->hookcount = count;
  s->hookmask = mask;
  if (mask & LUA_MASKCOUNT) {
    for (ci = s->ci; ci != NULL && (ci->callstatus & CIST_C); ci = ci->previous)
      ;
    if (ci != NULL)
      ci->u.l.trap = 1;
  }
}

/* The signal may come while the running thread sets up a call: Lua
** points L->ci at the new frame before it writes the frame's function,
** and a TValue is written in two stores.  So a frame read here may be
** stale or half written.  A slot is read only between the stack's base
** and its top (values there are alive), and every object it names is read
** with process_vm_readv, which fails on an address that is not mapped
** instead of faulting, and is then checked (its type; a thread of this Lua
** universe) before anything follows it. */
#if defined(__linux__)
static int safe_read (void *dst, const void *src, size_t n) {
  struct iovec to, from;
  to.iov_base = dst;
  to.iov_len = n;
  from.iov_base = (void *)src;
  from.iov_len = n;
  return process_vm_readv((pid_t)syscall(SYS_getpid), &to, 1, &from, 1, 0) ==
         (ssize_t)n;
}
#else
static int safe_read (void *dst, const void *src, size_t n) {
  (void)dst, (void)src, (void)n;
  return 0; /* the chain is not read (pm_trap_chain_verify fails) */
}
#endif

/* The coroutine that a thread's running frame resumes, or NULL: that
** frame runs resume (its first argument) or a function of wrap (its first
** upvalue). */
static TrapState *resumed (const TrapState *s, const lua_CFunction f[3]) {
  const TrapCI *ci = s->ci;
  const TrapValue *fn, *base = s->stack, *top = s->top;
  TrapValue co;
  TrapCClosure cl;
  TrapState t;
  if (ci == NULL || !(ci->callstatus & CIST_C))
    return NULL;
  fn = ci->func;
  if (fn < base || fn >= top)
    return NULL;
  if (fn->tt == TRAP_TLCF && f[0] != NULL && (lua_CFunction)fn->p == f[0] &&
      fn + 1 < top) {
    co = fn[1];
  } else if (fn->tt == TRAP_TCCL && safe_read(&cl, fn->p, sizeof(cl)) &&
             cl.tt == TRAP_VCCL && cl.nupvalues >= 1 && cl.f != NULL &&
             (cl.f == f[1] || cl.f == f[2])) {
    co = cl.upvalue[0];
  } else {
    return NULL;
  }
  if (co.tt != TRAP_TTHREAD || co.p == s || !safe_read(&t, co.p, sizeof(t)) ||
      t.tt != TRAP_VTHREAD || t.l_G != s->l_G)
    return NULL;
  return co.p;
}

int pm_trap_chain (lua_State *L, const lua_CFunction f[3],
                   lua_State *chain[PM_TRAP_CHAIN]) {
  TrapState *s = (TrapState *)L;
  int n = 0;
  do
    chain[n++] = (lua_State *)s;
  while (n < PM_TRAP_CHAIN && (s = resumed(s, f)) != NULL);
  return n;
}

/*
** {======================================================
** The start-up check
** =======================================================
*/

static _Thread_local struct {
  int events;
  int ok;
} check;

static void check_hook (lua_State *L, lua_Debug *ar) {
  (void)ar;
  check.events++;
  pm_trap_sethook(L, NULL, 0, 0, check.ok); /* step 3's, directly */
}

/* The frame below the probe, which is a Lua one, and whose mark is down:
** the hook event that step 1 (or 3) asked for has been answered, and the
** instruction after it found no hook and put the mark down. */
static TrapCI *lua_caller (lua_State *L) {
  TrapState *s = (TrapState *)L;
  lua_Debug top, caller;
  if (!lua_getstack(L, 0, &top) || !lua_getstack(L, 1, &caller) ||
      (void *)s->ci != (void *)top.i_ci ||
      (void *)s->ci->previous != (void *)caller.i_ci ||
      !(s->ci->callstatus & CIST_C) || (s->ci->previous->callstatus & CIST_C))
    return NULL;
  return s->ci->previous->u.l.trap == 0 ? s->ci->previous : NULL;
}

/* Whether two frames agree but for their marks, on the fields that a Lua
** frame always sets. */
static int same_frame (const TrapCI *a, const TrapCI *b) {
  return a->func == b->func && a->top == b->top && a->previous == b->previous &&
         a->next == b->next && a->u.l.savedpc == b->u.l.savedpc &&
         a->nresults == b->nresults && a->callstatus == b->callstatus;
}

/* Whether lua_sethook writes what the layout says, reading only. */
static int layout_agrees (lua_State *L) {
  TrapState *s = (TrapState *)L;
  TrapCI *ci = lua_caller(L), before;
  int ok;
  if (ci == NULL)
    return 0;
  before = *ci;
  lua_sethook(L, check_hook, LUA_MASKCOUNT | LUA_MASKCALL, 12345);
  ok = s->hook == check_hook && s->hookmask == (LUA_MASKCOUNT | LUA_MASKCALL) &&
       s->basehookcount == 12345 && s->hookcount == 12345 &&
       ci->u.l.trap == 1 && same_frame(&before, ci);
  lua_sethook(L, NULL, 0, 0);
  return ok && s->hook == NULL && s->hookmask == 0 && s->basehookcount == 0;
}

/* The steps of the check, called from Lua with the step's number:
** 1. a count event through lua_sethook, answered at the next instruction,
**    whose hook takes itself off;
** 2. the layout read against what lua_sethook writes;
** 3. a count event asked for directly, whose hook takes itself off
**    directly: the hook fields and the caller's mark must be as lua_sethook
**    leaves them;
** 4. the event came, once, and the hook is off. */
static int probe (lua_State *L) {
  TrapCI *ci;
  switch ((int)lua_tointeger(L, 1)) {
    case 1: lua_sethook(L, check_hook, LUA_MASKCOUNT, 1); break;
    case 2: check.ok = check.events == 1 && layout_agrees(L); break;
    case 3:
      if (!check.ok || (ci = lua_caller(L)) == NULL) {
        check.ok = 0;
        break;
      }
      check.events = 0;
      pm_trap_sethook(L, check_hook, LUA_MASKCOUNT, 1, 1);
      check.ok = lua_gethook(L) == check_hook &&
                 lua_gethookmask(L) == LUA_MASKCOUNT &&
                 lua_gethookcount(L) == 1 && ci->u.l.trap == 1;
      break;
    case 4:
      check.ok = check.ok && check.events == 1 && lua_gethook(L) == NULL &&
                 lua_gethookmask(L) == 0 && lua_gethookcount(L) == 0;
      break;
  }
  return 0;
}

/* Protected: loading the check can raise a memory error. */
static int run_check (lua_State *L) {
  if (luaL_loadstring(L, "local probe = ...\n"
                         "probe(1) local a = 1 local b = a + 1\n"
                         "probe(2) local c = b + 1 local d = c + 1\n"
                         "probe(3) local e = d + 1 local f = e + 1\n"
                         "probe(4) return f\n") != LUA_OK)
    return lua_error(L);
  lua_pushcfunction(L, probe);
  lua_call(L, 1, 0);
  return 0;
}

int pm_trap_verify (lua_State *L) {
  check.events = check.ok = 0;
  pm_frame_run_check(L, run_check);
  return check.ok;
}

/* }====================================================== */

/*
** {======================================================
** The chain of resumes: its start-up check
** =======================================================
*/

static _Thread_local struct {
  const lua_CFunction *f;
  int base; /* the chain's length where the check began */
  int ok;
} chain_check;

/* chain_probe(k): the thread calling it is the chain's last, k resumes
** deeper than where the check began. */
static int chain_probe (lua_State *L) {
  lua_State *chain[PM_TRAP_CHAIN], *main;
  int k = (int)lua_tointeger(L, 1), n;
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  main = lua_tothread(L, -1);
  lua_pop(L, 1);
  n = pm_trap_chain(main, chain_check.f, chain);
  if (k == 0 && chain_check.base == 0)
    chain_check.base = n;
  if (chain[n - 1] != L || n != chain_check.base + k)
    chain_check.ok = 0;
  return 0;
}

/* Protected: loading the check can raise a memory error.  Its argument is
** the coroutine library. */
static int run_chain_check (lua_State *L) {
  if (luaL_loadstring(
          L,
          "local probe, co = ...\n"
          "probe(0)\n"
          "local inner = co.wrap(function() probe(2) co.yield() probe(2) end)\n"
          "local outer = co.create(function()\n"
          "  probe(1) inner() probe(1) co.yield() inner() probe(1) end)\n"
          "co.resume(outer) probe(0) co.resume(outer) probe(0)\n") != LUA_OK)
    return lua_error(L);
  lua_pushcfunction(L, chain_probe);
  lua_pushvalue(L, 1);
  lua_call(L, 2, 0);
  return 0;
}

int pm_trap_chain_verify (lua_State *L, const lua_CFunction f[3]) {
  int ok;
  if (f[0] == NULL || f[1] == NULL)
    return 0;
  chain_check.f = f;
  chain_check.base = 0;
  chain_check.ok = 1;
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getfield(L, -1, LUA_COLIBNAME);
  lua_remove(L, -2);
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    return 0;
  }
  lua_pushcfunction(L, run_chain_check);
  lua_insert(L, -2);
  ok = lua_pcall(L, 1, 0, 0) == LUA_OK;
  if (!ok)
    lua_pop(L, 1); /* the error: the chain is not read */
  return ok && chain_check.ok && chain_check.base > 0;
}

/* }====================================================== */
