package resp

import "strings"

// subcommand is one subcommand of a command that has them (XGROUP,
// XINFO): its name in lower case, its arity counted as a command's (the
// command's name and its own included; -n: at least n), what runs it once
// its arity holds, and its lines in the command's HELP.
type subcommand struct {
	name  string
	arity int
	run   func(x *call)
	help  []string
}

// subcommandTable is a command's subcommands in the order its HELP lists
// them; HELP itself (helpSubcommand) comes last, answered by the table.
type subcommandTable struct {
	cmd  string // upper case, as errors and HELP name it
	subs []subcommand
}

var helpSubcommand = subcommand{name: "help", arity: 2, help: []string{"HELP", "    Prints this help."}}

// find is the subcommand args[1] names; nil if there is none.
func (st *subcommandTable) find(args [][]byte) *subcommand {
	name := strings.ToLower(string(args[1]))
	if name == helpSubcommand.name {
		return &helpSubcommand
	}
	for i := range st.subs {
		if st.subs[i].name == name {
			return &st.subs[i]
		}
	}
	return nil
}

// arityError is the error of an unknown subcommand or of a subcommand's
// wrong number of arguments, checked also when MULTI queues the command,
// as Redis checks a subcommand's arity; "" if none.
func (st *subcommandTable) arityError(args [][]byte) string {
	sub := st.find(args)
	switch n := len(args); {
	case sub == nil:
		return "ERR unknown subcommand '" + trunc(args[1]) + "'. Try " + st.cmd + " HELP."
	case sub.arity >= 0 && n != sub.arity, sub.arity < 0 && n < -sub.arity:
		return errArity(strings.ToLower(st.cmd) + "|" + sub.name)
	}
	return ""
}

// run checks the arity of the subcommand x names and runs it.
func (st *subcommandTable) run(x *call) {
	if rerr := st.arityError(x.args); rerr != "" {
		x.c.WriteError(rerr)
		return
	}
	if sub := st.find(x.args); sub != &helpSubcommand {
		sub.run(x)
		return
	}
	lines := []string{st.cmd + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"}
	for _, s := range st.subs {
		lines = append(lines, s.help...)
	}
	lines = append(lines, helpSubcommand.help...)
	x.c.WriteArray(len(lines))
	for _, l := range lines {
		x.c.WriteString(l)
	}
}

// errSubcommandSyntax is the error of a subcommand's options Redis does
// not take (after the arity check).
func errSubcommandSyntax(cmd string, sub []byte) string {
	return "ERR unknown subcommand or wrong number of arguments for '" + trunc(sub) + "'. Try " + cmd + " HELP."
}
