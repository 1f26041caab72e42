package jsonx

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMarshalForm: MarshalForm says true only of raw JSON that Marshal
// writes back byte for byte.
func TestMarshalForm(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want bool
	}{
		{`{}`, true}, {`[]`, true}, {`{"a":[1,-0,2.50,1e3,1E+2,-3e-1,true,false,null,"x"]}`, true},
		{`{"a":"\"\\\/\b\f\n\r\t\u00e9\u003C"}`, true}, {`"é €"`, true}, {`{"a":1,"a":2}`, true},
		{``, false}, {` {}`, false}, {`{} `, false}, {`{"a": 1}`, false}, {"[1,\n2]", false}, {`{"a":"<"}`, false},
		{`"&"`, false}, {`">"`, false}, {"\"\u2028\"", false}, {"\"\u2029\"", false}, {"\"\xff\"", false},
		{"\"a\tb\"", false}, {`"\x"`, false}, {`"\u12"`, false}, {`"\u12g4"`, false}, {`"abc`, false},
		{`01`, false}, {`1.`, false}, {`.5`, false}, {`1e`, false}, {`-`, false}, {`+1`, false},
		{`{"a":}`, false}, {`{"a"1}`, false}, {`{1:2}`, false}, {`[1,]`, false}, {`{"a":1,}`, false}, {`[1 2]`, false},
		{`tru`, false}, {`nul`, false}, {`{}{}`, false}, {`]`, false},
		{strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1), false},
		{strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth), true},
	} {
		if got := MarshalForm([]byte(c.raw)); got != c.want {
			t.Errorf("MarshalForm(%q) = %v, want %v", c.raw, got, c.want)
		}
		checkMarshalForm(t, []byte(c.raw))
	}
}

// checkMarshalForm fails when MarshalForm says true of raw that json.Marshal
// refuses or changes.
func checkMarshalForm(t *testing.T, raw []byte) {
	t.Helper()
	if !MarshalForm(raw) {
		return
	}
	b, err := json.Marshal(json.RawMessage(raw))
	if err != nil || string(b) != string(raw) {
		t.Errorf("MarshalForm(%q) is true, and Marshal gives %q, %v", raw, b, err)
	}
}

func FuzzMarshalForm(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e-3,"x\u00e9\n"],"b":{"c":null}}`, `"<"`, `{"a": 1}`, "\"\xe2\x80\xa8\"", `[-0.0e+0]`, `"\ud800"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkMarshalForm(t, raw) })
}
