from jmspy.cli import main

raise SystemExit(main())
