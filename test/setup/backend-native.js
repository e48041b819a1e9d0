process.env.MEMPO_BACKEND = 'native';
