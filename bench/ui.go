package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/tah-dev/tah/inspector"
)

// UIResult is row 10: the step inspector's time to first render, measured
// as a browser's request of the page until its last byte (the API's reads,
// the fold of the session's log, the templates), over HTTP on loopback.
type UIResult struct {
	Sessions int `json:"sessions"`
	Steps    int `json:"steps"`
	// List is the median of the list page's renders (its first page of
	// 50 among Sessions); Session the median of the 1,000-step session's.
	List    time.Duration `json:"list_ns"`
	Session time.Duration `json:"session_ns"`
	// ListFirst and SessionFirst are the first, cold, renders.
	ListFirst    time.Duration `json:"list_first_ns"`
	SessionFirst time.Duration `json:"session_first_ns"`
	SessionBytes int           `json:"session_bytes"`
}

// targetUIRender is the bound on each first render.
const targetUIRender = 300 * time.Millisecond

// uiRenders is how many renders of each page the medians are of.
const uiRenders = 7

// uiToolSteps is the most tool steps a turn of the long session makes (a
// turn of n tool steps is 2n+1 steps).
const uiToolSteps = 99

// uiScenario is row 10: one node, UISessions sessions, one of them with
// UISteps steps, and the inspector's handler over the bench's client.
type uiScenario struct {
	cfg  Config
	st   *stack
	srv  *http.Server
	done chan struct{}
	url  string
	sid  string
}

func (s *uiScenario) Name() string {
	return fmt.Sprintf("row 10: the UI's first render, %d sessions and a %d-step session", s.cfg.UISessions, s.cfg.UISteps)
}

func (s *uiScenario) Setup(ctx context.Context, env Env) error {
	tool, final := scriptedMocks(0)
	var err error
	if s.st, err = startStack(env, s.cfg.Tmp, stackOpts{sync: 2 * time.Minute, provider: newProbe(tool, final, false)}); err != nil {
		return err
	}
	s.sid = "s_ui0000000000000long"
	if err := s.longSession(ctx); err != nil {
		return err
	}
	env.Note("%d steps in %s", s.cfg.UISteps, s.sid)
	if err := parallel(ctx, s.cfg.UISessions-1, 32, func(i int) error {
		return s.st.create(ctx, fmt.Sprintf("s_ui%017d", i))
	}); err != nil {
		return err
	}
	if err := s.st.waitReadModel(ctx); err != nil {
		return err
	}
	env.Note("%d sessions in the read model", s.cfg.UISessions)
	h, err := inspector.New(inspector.Options{Client: s.st.cl})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.url, s.srv, s.done = "http://"+ln.Addr().String(), &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, make(chan struct{})
	go func() { // owned by the scenario: ends at Teardown's Shutdown
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return nil
}

// longSession gives s.sid turns of tool steps until it has UISteps steps.
func (s *uiScenario) longSession(ctx context.Context) error {
	if err := s.st.create(ctx, s.sid); err != nil {
		return err
	}
	for left := s.cfg.UISteps; left > 0; {
		n := min(uiToolSteps, (left-1)/2)
		_, o, err := s.st.run(ctx, s.sid, input(s.sid, n))
		if err != nil {
			return err
		}
		if o.Status != "completed" {
			return fmt.Errorf("a turn of %s ended %s: %s", s.sid, o.Status, o.Error)
		}
		left -= 2*n + 1
	}
	return nil
}

func (s *uiScenario) Run(ctx context.Context, rep *Report) error {
	res := &UIResult{Sessions: s.cfg.UISessions, Steps: s.cfg.UISteps}
	var err error
	if res.ListFirst, res.List, _, err = s.renders(ctx, "/"); err != nil {
		return err
	}
	if res.SessionFirst, res.Session, res.SessionBytes, err = s.renders(ctx, "/s/"+s.sid); err != nil {
		return err
	}
	rep.UI = res
	return nil
}

// renders gets path uiRenders times and returns the first time, the median
// and the page's size.
func (s *uiScenario) renders(ctx context.Context, path string) (first, median time.Duration, size int, err error) {
	times := make([]time.Duration, 0, uiRenders)
	for range uiRenders {
		begin := time.Now()
		size, err = s.get(ctx, path)
		if err != nil {
			return 0, 0, 0, err
		}
		times = append(times, time.Since(begin))
	}
	first = times[0]
	slices.Sort(times)
	return first, times[len(times)/2], size, nil
}

func (s *uiScenario) get(ctx context.Context, path string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+path, nil)
	if err != nil {
		return 0, err
	}
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer r.Body.Close()
	n, err := io.Copy(io.Discard, r.Body)
	if err == nil && r.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", path, r.Status)
	}
	return int(n), err
}

func (s *uiScenario) Teardown(ctx context.Context) error {
	if s.srv != nil {
		_ = s.srv.Shutdown(ctx)
		<-s.done
	}
	s.st.close()
	return nil
}

// uiRow is row 10 of the table.
func (r *Report) uiRows() []row {
	u := r.UI
	if u == nil {
		return nil
	}
	met := u.List <= targetUIRender && u.Session <= targetUIRender
	return []row{{"10", fmt.Sprintf("UI, first render (request to last byte, median of %d; first, cold): the list among %s sessions / a %s-step session's page (%s)",
		uiRenders, fnum(float64(u.Sessions)), fnum(float64(u.Steps)), fbytes(u.SessionBytes)), "",
		fmt.Sprintf("%s / %s (cold %s / %s)", fdur(u.List), fdur(u.Session), fdur(u.ListFirst), fdur(u.SessionFirst)), "", "",
		"≤ " + fdur(targetUIRender) + " each", metOr(met, "missed")}}
}
