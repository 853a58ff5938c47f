"""The medians of the rounds that contrib/bench/rounds.sh runs, for the benchmarks' reports."""
import csv
import statistics


def medians(path):
    """Each command's median in a hyperfine CSV export, in milliseconds, in the run's order.

    CSV columns: command,mean,stddev,median,user,system,min,max (seconds); the names hold no comma.
    """
    return {row["command"]: float(row["median"]) * 1000 for row in csv.DictReader(open(path))}


def read_rounds(rounds, directory=".", less=None, less_label=None):
    """Prints the order of the commands, then each round's medians, and returns those of every
    round (a list) and each command's over the rounds (a dict of lists). With `less`, that
    command's median is taken from the others' in each round, and it is named `less_label`."""
    first = medians(f"{directory}/round-1.csv")
    print("milliseconds, in this order: " + "; ".join(name for name in first if name != less))
    every, times = [], {}
    for round in range(1, rounds + 1):
        m = medians(f"{directory}/round-{round}.csv")
        label = f"round {round:2}"
        if less is not None:
            base = m.pop(less)
            m = {name: value - base for name, value in m.items()}
            label += f", less {less_label} ({base:.2f} ms)"
        for name, value in m.items():
            times.setdefault(name, []).append(value)
        print(f"{label}: " + ", ".join(f"{value:.2f}" for value in m.values()))
        every.append(m)
    return every, times


def spread(values):
    """The median of the values and their range: `median (min-max)`."""
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def print_medians(times, width, heading):
    """Prints the heading, then each command's median over the rounds."""
    print(heading)
    for name, values in times.items():
        print(f"  {name:{width}} {statistics.median(values):6.2f} ms")


def print_spreads(spreads, width, heading):
    """Prints the heading, then each named list of values as its median and range."""
    print(heading)
    for name, values in spreads.items():
        print(f"  {name:{width}} {spread(values)}")
