package sim

import (
	"strings"
	"testing"
	"time"
)

func TestCurves(t *testing.T) {
	step := StepCurve(100, time.Minute, 2)
	if step(59*time.Second) != 100 || step(time.Minute) != 200 {
		t.Fatal("step")
	}
	spike := SpikeCurve(400, 10*time.Second, 4.5, time.Minute)
	for at, want := range map[time.Duration]float64{9 * time.Second: 400, 10500 * time.Millisecond: 1100, 11 * time.Second: 1800,
		70 * time.Second: 1800, 72 * time.Second: 400} {
		if got := spike(at); got != want {
			t.Errorf("spike(%v) = %v, want %v", at, got, want)
		}
	}
	d := DiurnalCurve(1000, 500, 10*time.Minute, 0, 1)
	if d(0) != 500 || d(5*time.Minute) != 1500 {
		t.Fatalf("diurnal trough %v peak %v", d(0), d(5*time.Minute))
	}
	noisy := DiurnalCurve(1000, 0, time.Minute, 0.1, 7)
	if a, b := noisy(3*time.Second), noisy(3500*time.Millisecond); a != b || a < 900 || a > 1100 {
		t.Fatalf("noise must be fixed within a second and within ±10%%: %v %v", a, b)
	}
}

func TestTrace(t *testing.T) {
	pts, err := ParseTrace(strings.NewReader("# t,ops\n0,100\n10,300\n\n20,300\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := TraceCurve(pts)
	if c(5*time.Second) != 200 || c(time.Hour) != 300 || c(0) != 100 {
		t.Fatal("interpolation")
	}
	for _, bad := range []string{"", "1,2,3", "5,10\n5,20", "-1,3", "x,1"} {
		if _, err := ParseTrace(strings.NewReader(bad)); err == nil {
			t.Errorf("trace %q accepted", bad)
		}
	}
}
