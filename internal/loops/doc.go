// Package loops runs a node's background loops and tasks, and stops them
// together (Group): a loop runs its function every interval (Every,
// EveryWithin), or also when woken, no sooner than a gap after its
// previous wake's run returned (Wakeable); each run gets a context that
// ends when the group stops or after its timeout, four intervals plus
// slack unless the loop says (RunTimeout); Go runs a task the group waits
// for, and UntilStop bounds a task's own calls. Close tells every loop and
// task to stop (Stopped), Wait waits for them.
//
// It imports only the standard library: it imports no server, SDK or
// network code (internal/server, client, internal/transport, net,
// net/http) (internal/lint).
package loops
