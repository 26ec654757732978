from reproduce.starts import main

raise SystemExit(main())
