package resp

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestCommandsAreListed: docs/redis.md's "Commands" section names
// exactly the commands of the table, and COMMAND COUNT counts them.
func TestCommandsAreListed(t *testing.T) {
	doc, err := os.ReadFile("../../docs/redis.md")
	if err != nil {
		t.Fatal(err)
	}
	section := regexp.MustCompile("(?ms)^## Commands\n(.*?)^## ").FindSubmatch(doc)
	if section == nil {
		t.Fatal(`docs/redis.md has no "## Commands" section`)
	}
	list := regexp.MustCompile("(?ms)^- .*?(?:\n\n|\\z)").Find(section[1])
	var listed, served []string
	for _, m := range regexp.MustCompile("`([A-Z._]+)`").FindAllSubmatch(list, -1) {
		listed = append(listed, strings.ToLower(string(m[1])))
	}
	for name := range commands {
		served = append(served, name)
	}
	slices.Sort(listed)
	slices.Sort(served)
	if !slices.Equal(listed, served) {
		t.Errorf("docs/redis.md lists %v\nthe command table has %v", listed, served)
	}
	s, _ := start(t, newFakeKV(), nil, nil)
	eqReplies(t, pipeline(t, s, []string{"COMMAND", "COUNT"}), []string{":" + strconv.Itoa(len(commands))})
}
