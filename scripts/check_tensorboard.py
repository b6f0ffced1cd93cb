"""What TensorBoard shows of a gdn run against the run's metrics.jsonl and config.yaml.

Loads RUN_DIR/tb with TensorBoard's EventAccumulator (which reads the files in name order and
applies SessionLog START the way the TensorBoard UI does) and checks: every numeric field of
metrics.jsonl (but `step`) is a scalar tag with exactly the records' steps and values (as
float32), no other scalar tag exists, each events file starts with file_version brain.Event:2,
and each file has a `config` text (text plugin), the last one config.yaml in a YAML code block.
Prints a JSON summary; exit status 1 on a mismatch.
Usage: python check_tensorboard.py RUN_DIR   (scripts/check_tensorboard.sh runs it)
"""

import glob
import json
import os
import struct
import sys

import tensorboard
from tensorboard.backend.event_processing import event_accumulator, event_file_loader


def float32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def logged(run_dir):
    """metrics.jsonl's numeric fields: tag -> [(step, value)] in log order."""
    out = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            rec = json.loads(line)
            for k, v in rec.items():
                if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool):
                    out.setdefault(k, []).append((rec["step"], float32(v)))
    return out


def main(run_dir):
    tb = os.path.join(run_dir, "tb")
    files = sorted(glob.glob(os.path.join(tb, "events.out.tfevents.*")))
    problems = []
    starts = []
    written = []  # the scalar steps of the files read so far
    dropped = 0  # scalars of earlier files a START drops (a resume's orphans)
    for path in files:
        events = list(event_file_loader.LegacyEventFileLoader(path).Load())  # as written
        if not events or events[0].file_version != "brain.Event:2":
            problems.append(f"{os.path.basename(path)}: does not start with brain.Event:2")
        for e in events:
            if e.HasField("session_log") and e.session_log.status == e.session_log.START:
                starts.append(e.step)
                dropped += sum(1 for s in written if s >= e.step)
                written = [s for s in written if s < e.step]
            if e.HasField("summary"):
                written += [e.step for v in e.summary.value if v.HasField("simple_value")]
    acc = event_accumulator.EventAccumulator(
        tb, size_guidance={event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0})
    acc.Reload()
    want = logged(run_dir)
    shown = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    for tag in sorted(set(want) | set(shown)):
        if tag not in shown:
            problems.append(f"{tag}: in metrics.jsonl, not in TensorBoard")
        elif tag not in want:
            problems.append(f"{tag}: in TensorBoard, not in metrics.jsonl")
        elif shown[tag] != want[tag]:
            problems.append(f"{tag}: TensorBoard {shown[tag]} != metrics.jsonl {want[tag]}")
    with open(os.path.join(run_dir, "config.yaml")) as f:
        config = f.read()
    try:
        text_tags = acc.PluginTagToContent("text")  # tags whose metadata names the text plugin
    except KeyError:
        text_tags = {}
    configs = [e.tensor_proto.string_val[0].decode() for e in acc.Tensors("config")] \
        if "config" in text_tags else []
    if not configs:
        problems.append("no `config` text summary")
    # One per events file; the last (the resume's) is config.yaml as the run left it.
    if len(configs) != len(files):
        problems.append(f"{len(configs)} `config` texts for {len(files)} events files")
    if configs and configs[-1] != "```yaml\n" + config + "```\n":
        problems.append("the last `config` text differs from config.yaml")
    steps = sorted({s for v in want.values() for s, _ in v})
    summary = {
        "tensorboard": tensorboard.__version__,
        "run_dir": run_dir,
        "event_files": [os.path.basename(p) for p in files],
        "session_starts": starts,
        "scalars_dropped_by_start": dropped,
        "steps": [steps[0], steps[-1]] if steps else [],
        "scalar_tags": {tag: len(v) for tag, v in sorted(shown.items())},
        "config_texts": len(configs),
        "problems": problems,
        "ok": not problems,
    }
    print(json.dumps(summary, indent=2))
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
