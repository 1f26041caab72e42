package mock

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/tah-dev/tah/llm"
)

// The tools the demo knows, and the arguments it calls them with.
const (
	ToolListFiles = "list_files"
	ToolReadFile  = "read_file"
	// ListFilesArguments are the arguments of the demo's list_files (or
	// list_directory) call.
	ListFilesArguments = `{"path":"."}`
)

// turnCall is a tool call of the current turn and its result.
type turnCall struct {
	call   llm.ToolCall
	result string
	isErr  bool
	done   bool
}

// demo decides the answer to req without a script. It is a pure function of req.
func demo(req llm.Request) answer {
	if isCompaction(req) {
		return answer{tokens: splitTokens(summarize(req.Messages))}
	}
	u := lastUserIndex(req.Messages)
	prompt := lastUser(req.Messages)
	zh := hasCJK(prompt)
	tools := pickTools(req.Tools)
	if tools.list == "" && tools.read == "" {
		return answer{tokens: splitTokens(echo(prompt, zh))}
	}

	calls := turnCalls(req.Messages[u+1:])
	listed, hasList := lastCall(calls, tools.list)
	if tools.list != "" && !hasList {
		return callTool(tools.list, ListFilesArguments)
	}
	var l listing
	if hasList && !listed.isErr {
		l = withoutDataDir(parseListing(listed.result))
	}
	read, hasRead := lastCall(calls, tools.read)
	if tools.read != "" && !hasRead {
		name := l.readme()
		if tools.list == "" {
			name = "README.md"
		}
		if name != "" {
			args, _ := json.Marshal(map[string]string{"path": name})
			return callTool(tools.read, string(args))
		}
	}
	return answer{tokens: splitTokens(report(zh, listed, hasList, l, read, hasRead))}
}

// dataDirName is TAH's default data directory, which holds the node's log and
// credentials.
const dataDirName = ".tah"

// withoutDataDir leaves TAH's data directory, and what is under it, out of l: the
// demo neither reports it nor reads in it, even when a list_files (a tool
// service's, say) shows it. The built-in list_files never does.
func withoutDataDir(l listing) listing {
	var kept []entry
	for _, e := range l.entries {
		top, _, _ := strings.Cut(e.path, "/")
		if !strings.EqualFold(top, dataDirName) {
			kept = append(kept, e)
		}
	}
	return listing{entries: kept}
}

func callTool(name, args string) answer {
	return answer{calls: []llm.ToolCall{{Name: name, Arguments: json.RawMessage(args)}}}
}

// turnCalls pairs the tool calls of msgs (the current turn) with their results.
func turnCalls(msgs []llm.Message) []*turnCall {
	var out []*turnCall
	byID := map[string]*turnCall{}
	for _, m := range msgs {
		switch m.Role {
		case llm.RoleAssistant:
			for _, c := range m.ToolCalls {
				tc := &turnCall{call: c}
				out = append(out, tc)
				byID[c.ID] = tc
			}
		case llm.RoleTool:
			if tc, ok := byID[m.ToolCallID]; ok {
				tc.result, tc.isErr, tc.done = m.Content, m.IsError, true
			}
		}
	}
	return out
}

func lastCall(calls []*turnCall, name string) (*turnCall, bool) {
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].call.Name == name {
			return calls[i], true
		}
	}
	return nil, false
}

// demoNote ends every demo answer, so that nobody takes it for a model's.
var demoNote = map[bool]string{
	false: "(Demo mode: TAH's mock model wrote this from the tool results, without a real LLM. See the README's \"Models\" section to use a real one.)",
	true:  "（演示模式：这是 TAH 的模拟模型根据工具结果写出的回答，没有调用真实的大模型。要使用真实模型，请看 README 的 “Models” 一节。）",
}

func echo(prompt string, zh bool) string {
	p := clip(strings.Join(strings.Fields(prompt), " "), 200)
	if zh {
		if p == "" {
			return "你好！我是 TAH 演示模式下的模拟模型。" + "\n\n" + "提供 list_files 和 read_file 工具时，我会分析项目的目录结构；要获得真正的回答，请配置一个真实的模型（见 README 的 “Models” 一节）。"
		}
		return "你说：“" + p + "”。\n\n我是 TAH 演示模式下的模拟模型：回答是确定的，没有调用真实的大模型。提供 list_files 和 read_file 工具时，我会分析项目的目录结构；要获得真正的回答，请配置一个真实的模型（见 README 的 “Models” 一节）。"
	}
	if p == "" {
		return "Hello! I am TAH's mock model in demo mode.\n\nOffer me the tools list_files and read_file and I will analyse the project's directory structure; configure a real provider (see the README's \"Models\" section) for real answers."
	}
	return "You said: \"" + p + "\".\n\nI am TAH's mock model in demo mode: my answers are deterministic and no real LLM is involved. Offer me the tools list_files and read_file and I will analyse the project's directory structure; configure a real provider (see the README's \"Models\" section) for real answers."
}

// report writes the demo's analysis of the project from the tool results.
func report(zh bool, listed *turnCall, hasList bool, l listing, read *turnCall, hasRead bool) string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	readName := ""
	if hasRead {
		var a struct {
			Path string `json:"path"`
		}
		_ = json.Unmarshal(read.call.Arguments, &a)
		readName = a.Path
	}

	// Opening.
	switch {
	case zh && hasList && hasRead:
		line("我用 `%s` 查看了项目的目录结构，并读了 `%s`。", listed.call.Name, readName)
	case zh && hasList:
		line("我用 `%s` 查看了项目的目录结构。", listed.call.Name)
	case zh:
		line("我读了 `%s`。", readName)
	case hasList && hasRead:
		line("I listed the project with `%s` and read `%s`.", listed.call.Name, readName)
	case hasList:
		line("I listed the project with `%s`.", listed.call.Name)
	default:
		line("I read `%s`.", readName)
	}

	// The structure.
	if hasList {
		line("")
		if zh {
			line("**目录结构**")
		} else {
			line("**Structure**")
		}
		dirs, files := l.top()
		switch {
		case listed.isErr:
			if zh {
				line("- `%s` 失败了：%s", listed.call.Name, clip(oneLine(listed.result), 200))
			} else {
				line("- `%s` failed: %s", listed.call.Name, clip(oneLine(listed.result), 200))
			}
		case len(dirs)+len(files) == 0:
			if zh {
				line("- 列表里没有任何条目：目录是空的。")
			} else {
				line("- The listing shows no entries: the directory is empty.")
			}
		default:
			if zh {
				line("- 顶层共有 %d 项：%d 个目录，%d 个文件。", len(dirs)+len(files), len(dirs), len(files))
			} else {
				line("- The top level holds %d entries: %s and %s.", len(dirs)+len(files), plural(len(dirs), "directory", "directories"), plural(len(files), "file", "files"))
			}
			if len(dirs) > 0 {
				if zh {
					line("- 目录：%s", names(dirs, "/", zh))
				} else {
					line("- Directories: %s", names(dirs, "/", zh))
				}
			}
			if len(files) > 0 {
				if zh {
					line("- 文件：%s", names(files, "", zh))
				} else {
					line("- Files: %s", names(files, "", zh))
				}
			}
			if nd, nf := l.counts(); nd+nf > len(dirs)+len(files) {
				if zh {
					line("- 整个列表共显示 %d 个目录、%d 个文件。", nd, nf)
				} else {
					line("- The whole listing shows %s and %s.", plural(nd, "directory", "directories"), plural(nf, "file", "files"))
				}
			}
			if kinds := projectKinds(files, zh); kinds != "" {
				if zh {
					line("- 看起来是%s。", kinds)
				} else {
					line("- It looks like %s.", kinds)
				}
			}
		}
	}

	// The README.
	if hasRead {
		line("")
		line("**%s**", readName)
		switch {
		case read.isErr:
			if zh {
				line("- 读取失败：%s", clip(oneLine(read.result), 200))
			} else {
				line("- Reading it failed: %s", clip(oneLine(read.result), 200))
			}
		default:
			title, para := readmeGist(read.result)
			if title != "" {
				if zh {
					line("- 标题：%s", title)
				} else {
					line("- Title: %s", title)
				}
			}
			if para != "" {
				if zh {
					line("- 开头：“%s”", para)
				} else {
					line("- It begins: \"%s\"", para)
				}
			}
			if title == "" && para == "" {
				if zh {
					line("- 文件是空的。")
				} else {
					line("- The file is empty.")
				}
			}
		}
	} else if hasList && !listed.isErr {
		line("")
		if zh {
			line("顶层没有 README 文件。")
		} else {
			line("There is no README file at the top level.")
		}
	}
	line("")
	b.WriteString(demoNote[zh])
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// names lists up to 15 names in backquotes, saying how many more there are.
func names(list []string, suffix string, zh bool) string {
	const max = 15
	var parts []string
	for i, n := range list {
		if i == max {
			break
		}
		parts = append(parts, "`"+n+suffix+"`")
	}
	s := strings.Join(parts, ", ")
	if zh {
		s = strings.Join(parts, "、")
	}
	if more := len(list) - max; more > 0 {
		if zh {
			s += fmt.Sprintf(" 等（另有 %d 项）", more)
		} else {
			s += fmt.Sprintf(" and %d more", more)
		}
	}
	return s
}

// projectKinds guesses what the project is from its top-level files.
func projectKinds(files []string, zh bool) string {
	has := map[string]bool{}
	for _, f := range files {
		has[f] = true
	}
	type kind struct{ file, en, zh string }
	var found []string
	for _, k := range []kind{
		{"go.mod", "a Go module (go.mod)", "一个 Go 模块（go.mod）"},
		{"package.json", "a Node.js package (package.json)", "一个 Node.js 包（package.json）"},
		{"Cargo.toml", "a Rust crate (Cargo.toml)", "一个 Rust crate（Cargo.toml）"},
		{"pyproject.toml", "a Python project (pyproject.toml)", "一个 Python 项目（pyproject.toml）"},
		{"setup.py", "a Python package (setup.py)", "一个 Python 包（setup.py）"},
		{"pom.xml", "a Maven project (pom.xml)", "一个 Maven 项目（pom.xml）"},
		{"build.gradle", "a Gradle project (build.gradle)", "一个 Gradle 项目（build.gradle）"},
		{"Makefile", "built with make (Makefile)", "用 make 构建（Makefile）"},
		{"Dockerfile", "packaged as a container image (Dockerfile)", "打包成容器镜像（Dockerfile）"},
	} {
		if has[k.file] {
			if zh {
				found = append(found, k.zh)
			} else {
				found = append(found, k.en)
			}
		}
	}
	if zh {
		return strings.Join(found, "，")
	}
	return strings.Join(found, ", ")
}

var lineNumber = regexp.MustCompile(`^\s*\d+\s*[:|\t→]\s?`)

// readmeGist returns a README's title and the start of its first paragraph.
func readmeGist(content string) (title, para string) {
	var v struct {
		Content string `json:"content"`
		Text    string `json:"text"`
	}
	if strings.HasPrefix(strings.TrimSpace(content), "{") && json.Unmarshal([]byte(content), &v) == nil {
		if v.Content != "" {
			content = v.Content
		} else if v.Text != "" {
			content = v.Text
		}
	}
	lines := strings.Split(strings.ReplaceAll(content, "\r\n", "\n"), "\n")
	numbered := 0
	nonEmpty := 0
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			nonEmpty++
			if lineNumber.MatchString(l) {
				numbered++
			}
		}
	}
	if nonEmpty > 0 && numbered == nonEmpty {
		for i, l := range lines {
			lines[i] = lineNumber.ReplaceAllString(l, "")
		}
	}
	var paraLines []string
	inCode := false
scan:
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			inCode = !inCode
			if len(paraLines) > 0 {
				break scan
			}
			continue
		}
		if inCode {
			continue
		}
		switch {
		case t == "":
			if len(paraLines) > 0 {
				break scan
			}
		case strings.HasPrefix(t, "#"):
			if len(paraLines) > 0 {
				break scan
			}
			if title == "" {
				title = strings.TrimSpace(strings.TrimLeft(t, "#"))
			}
		case i+1 < len(lines) && title == "" && isUnderline(lines[i+1]):
			title = t // a setext heading
		case isUnderline(t), strings.HasPrefix(t, "!["), strings.HasPrefix(t, "[!["),
			strings.HasPrefix(t, "<"), strings.HasPrefix(t, "|"), strings.HasPrefix(t, ">"):
			if len(paraLines) > 0 {
				break scan
			}
		default:
			if title == "" && len(paraLines) == 0 && !strings.HasSuffix(t, ".") && len([]rune(t)) < 80 && i == firstNonEmpty(lines) {
				title = t // a plain first line
				continue
			}
			paraLines = append(paraLines, t)
		}
	}
	return clip(title, 120), clip(strings.Join(paraLines, " "), 300)
}

func isUnderline(s string) bool {
	s = strings.TrimSpace(s)
	return len(s) >= 3 && (strings.Trim(s, "=") == "" || strings.Trim(s, "-") == "")
}

func firstNonEmpty(lines []string) int {
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			return i
		}
	}
	return -1
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
