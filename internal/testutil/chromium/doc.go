// Package chromium lets tests drive Debian's headless Chromium: Path finds
// the browser, DumpDOM returns the DOM of a page after its scripts have run,
// Screenshot renders a page to a PNG, and Launch starts a Browser that a
// test drives step by step over the DevTools protocol (navigate, evaluate
// script in the page, wait for a condition), for pages it must act on, such
// as a login form. Tests that use it should skip when Path reports no
// browser.
//
// Every run gets a fresh profile and HOME in a temporary directory (removed
// afterwards), is bounded by a wall-clock timeout and, on timeout or
// cancellation, has its whole process group killed, so a hung page never
// outlives the test. Chromium runs with background networking, component
// updates and sync disabled: on a machine without internet access its own
// outbound connections would otherwise fail or stall the run.
//
// Timing: DumpDOM and Screenshot use --virtual-time-budget, under which timers fire as
// fast as the page allows and the browser exits when the budget of virtual
// time is spent. Virtual time pauses while network fetches are pending, so a
// page that fetches JSON and renders it is fully rendered in the dumped DOM
// even with a 1 s budget; a page that polls with setInterval simply consumes
// the budget in a fraction of real time. The flip side is that a fetch that
// never completes stalls the run, which the wall-clock timeout catches.
//
// The package imports only the standard library and is Unix-only (it uses
// process groups).
package chromium
