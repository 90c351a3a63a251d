"""Each rank notes its process id in the folder given, then waits to be stopped."""
import os
import sys
import time

folder = sys.argv[1]
with open(os.path.join(folder, f"{os.getpid()}.pid"), "w"):
    pass
print(f"rank {os.environ['RANK']} ready", flush=True)
print(f"rank {os.environ['RANK']} to stderr", file=sys.stderr, flush=True)
if len(sys.argv) > 2:
    sys.exit(int(sys.argv[2]) if os.environ["RANK"] == "1" else 0)
time.sleep(600)
